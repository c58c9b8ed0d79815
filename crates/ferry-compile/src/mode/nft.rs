//! nftables mode's renderer.

use ferry_model::ClusterState;

use super::{ProxyMode, Renderer};
use crate::nft::NodeRules;
use crate::NodeCompiler;

/// nftables mode's renderer: Ferry's table (`table ip ferry`), as `nft -f` takes it.
#[derive(Debug, Clone, Copy, Default)]
pub struct NftRenderer;

impl Renderer for NftRenderer {
    fn mode(&self) -> ProxyMode {
        ProxyMode::Nftables
    }

    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String {
        NodeRules::new(compiler).full(state).to_string()
    }
}
