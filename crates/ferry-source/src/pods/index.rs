//! Which Pods each selector Service selects, and the other way round.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferry_model::{Pod, Service, ServiceName};

use super::PodKey;

/// The selection index: kept in step with the Services and Pods as they change, so a readiness
/// change or a Pod edit finds its Services without scanning them all.
#[derive(Debug, Clone, Default)]
pub(super) struct Selection {
    pods_of: BTreeMap<ServiceName, BTreeSet<PodKey>>,
    services_of: BTreeMap<PodKey, BTreeSet<ServiceName>>,
}

impl Selection {
    /// The Pods a Service selects.
    pub fn pods_of(&self, service: &ServiceName) -> impl Iterator<Item = &PodKey> {
        self.pods_of.get(service).into_iter().flatten()
    }

    /// True when the Service selects at least one Pod.
    pub fn selects_any(&self, service: &ServiceName) -> bool {
        self.pods_of.get(service).is_some_and(|p| !p.is_empty())
    }

    /// Every Service that selects at least one Pod.
    pub fn selecting(&self) -> impl Iterator<Item = &ServiceName> {
        self.pods_of.keys()
    }

    /// The Services that select a Pod.
    pub fn services_of(&self, pod: &PodKey) -> impl Iterator<Item = &ServiceName> {
        self.services_of.get(pod).into_iter().flatten()
    }

    /// Every Pod some Service selects.
    pub fn selected_pods(&self) -> impl Iterator<Item = &PodKey> {
        self.services_of.keys()
    }

    /// Re-reads which Pods `service` selects (`None`: it is gone or has no selector).
    pub fn set_service(
        &mut self,
        name: &ServiceName,
        service: Option<&Service>,
        pods: &BTreeMap<PodKey, Arc<Pod>>,
    ) {
        for pod in self.pods_of.remove(name).unwrap_or_default() {
            self.unlink(&pod, name);
        }
        let Some(selector) = service.and_then(|s| s.selector.as_ref()) else {
            return;
        };
        let selected: BTreeSet<PodKey> = in_namespace(pods, &name.namespace)
            .filter(|(_, pod)| selector.matches(&pod.labels))
            .map(|(key, _)| key.clone())
            .collect();
        for pod in &selected {
            self.services_of
                .entry(pod.clone())
                .or_default()
                .insert(name.clone());
        }
        if !selected.is_empty() {
            self.pods_of.insert(name.clone(), selected);
        }
    }

    /// Re-reads which Services select `pod` (`None`: it is gone); returns the Services whose
    /// selection may have changed (before and after).
    pub fn set_pod(
        &mut self,
        key: &PodKey,
        pod: Option<&Pod>,
        services: &BTreeMap<ServiceName, Arc<Service>>,
    ) -> BTreeSet<ServiceName> {
        let before = self.services_of.remove(key).unwrap_or_default();
        for service in &before {
            if let Some(pods) = self.pods_of.get_mut(service) {
                pods.remove(key);
                if pods.is_empty() {
                    self.pods_of.remove(service);
                }
            }
        }
        let mut after = BTreeSet::new();
        if let Some(pod) = pod {
            let first = ServiceName::new(&*key.namespace, "");
            for (name, service) in services.range(first..) {
                if name.namespace != key.namespace {
                    break;
                }
                if service
                    .selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&pod.labels))
                {
                    after.insert(name.clone());
                    self.pods_of
                        .entry(name.clone())
                        .or_default()
                        .insert(key.clone());
                }
            }
        }
        if !after.is_empty() {
            self.services_of.insert(key.clone(), after.clone());
        }
        after.extend(before);
        after
    }

    fn unlink(&mut self, pod: &PodKey, service: &ServiceName) {
        if let Some(services) = self.services_of.get_mut(pod) {
            services.remove(service);
            if services.is_empty() {
                self.services_of.remove(pod);
            }
        }
    }
}

/// The Pods of one namespace.
fn in_namespace<'a>(
    pods: &'a BTreeMap<PodKey, Arc<Pod>>,
    namespace: &'a Arc<str>,
) -> impl Iterator<Item = (&'a PodKey, &'a Arc<Pod>)> {
    let first = PodKey::new(&**namespace, "");
    pods.range(first..)
        .take_while(move |(key, _)| key.namespace == *namespace)
}
