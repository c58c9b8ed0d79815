//! Reading one file: its documents → one [`Doc`] per Kubernetes object written there.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_model::{EndpointSlice, Interner, Object, ObjectRef, ServiceName};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{convert, InvalidObject};

/// One object as written in a file, converted.
#[derive(Debug)]
pub(super) struct Doc {
    /// Its place among the file's documents (list items counted one by one), so errors and
    /// duplicates can be ordered as written.
    pub index: usize,
    /// `Kind namespace/name` as written; `None` when it has no name (or no kind), so it cannot
    /// be matched with an earlier version of itself.
    pub id: Option<ObjectRef>,
    /// The model objects (none when the proxy ignores it, several for a mirrored Endpoints), or
    /// why it is invalid (`file` is filled in later). The objects come as the shared list the
    /// store keeps, made on the reading thread (a list the store copied left a hole in that
    /// thread's heap for each); the error is boxed, since every file's documents are held
    /// until the store takes them and an error is rare and large.
    pub outcome: Result<Arc<[Object]>, Box<InvalidObject>>,
}

/// What reading one file gave.
#[derive(Debug)]
pub(super) enum FileRead {
    /// Its documents of the kinds Ferry reads (and those that are not objects at all), in order.
    Docs(Vec<Doc>),
    /// It could not be read or parsed (the error), or it lies in a directory that could not be
    /// read (`None`: the directory's error is reported): its objects keep their last good
    /// versions.
    Broken(Option<Box<InvalidObject>>),
    /// It is gone (removed, or renamed away): its objects go.
    Gone,
}

/// Reads one file's documents. `names` shares repeated names and endpoint locations between
/// the objects read with it (see [`compact_slice`]).
pub(super) fn read_file(file: &Path, names: &mut Interner) -> FileRead {
    let text = match fs::read_to_string(file) {
        Ok(text) => text,
        // Removed between the event and the read: a later event says what replaced it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FileRead::Gone,
        Err(e) => {
            let error = InvalidObject::file(file, format!("cannot read: {e}"));
            return FileRead::Broken(Some(Box::new(error)));
        }
    };
    read_text(file, &text, names)
}

/// One file's documents, from its text (what [`read_file`] does once the file is read).
pub(super) fn read_text(file: &Path, text: &str, names: &mut Interner) -> FileRead {
    match parse(file, text) {
        Ok(documents) => {
            let mut docs = Vec::new();
            for (index, value) in documents.into_iter().enumerate() {
                document(file, index, value, None, names, &mut docs);
            }
            // Held with every other file's until the store takes them: no room to spare.
            docs.shrink_to_fit();
            FileRead::Docs(docs)
        }
        Err(reason) => FileRead::Broken(Some(Box::new(InvalidObject::file(file, reason)))),
    }
}

/// The documents of one file (a JSON file holds one), or why it cannot be read.
pub(super) fn file_documents(file: &Path) -> Result<Vec<Value>, String> {
    let text = fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))?;
    parse(file, &text)
}

/// The documents of `file`'s text: JSON for a `.json` file, a YAML stream otherwise.
fn parse(file: &Path, text: &str) -> Result<Vec<Value>, String> {
    let is_json = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_json {
        parse_json(text)
    } else {
        super::yaml::parse(text)
    }
}

/// The manifest files under PATH (PATH itself when it is a file), in read order, and the
/// problems met walking there.
pub(super) fn files(path: &Path) -> (Vec<PathBuf>, Vec<InvalidObject>) {
    let walk = super::walk::walk(path, true);
    (walk.files, walk.errors)
}

/// Converts one document (or list item) as the loader does: the objects it stands for (none
/// for kinds Ferry does not read), or its problems.
pub(super) fn convert_document(
    file: &Path,
    value: Value,
) -> Vec<Result<Vec<Object>, InvalidObject>> {
    let mut docs = Vec::new();
    document(file, 0, value, None, &mut Interner::default(), &mut docs);
    docs.into_iter()
        .map(|d| d.outcome.map(|o| o.to_vec()).map_err(|e| *e))
        .collect()
}

fn parse_json(text: &str) -> Result<Vec<Value>, String> {
    serde_json::from_str(text)
        .map(|v| vec![v])
        .map_err(|e| format!("not valid JSON: {e}"))
}

/// The kinds Ferry reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Service,
    EndpointSlice,
    Endpoints,
    Node,
    Pod,
    ServiceCidr,
}

impl Kind {
    fn of(api_version: &str, kind: &str) -> Option<Kind> {
        match (api_version, kind) {
            ("v1", "Service") => Some(Kind::Service),
            ("discovery.k8s.io/v1", "EndpointSlice") => Some(Kind::EndpointSlice),
            ("v1", "Endpoints") => Some(Kind::Endpoints),
            ("v1", "Node") => Some(Kind::Node),
            ("v1", "Pod") => Some(Kind::Pod),
            ("networking.k8s.io/v1", "ServiceCIDR") => Some(Kind::ServiceCidr),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Endpoints => "Endpoints",
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::ServiceCidr => "ServiceCIDR",
        }
    }
}

/// One document (or list item): dispatches on `apiVersion` and `kind`. `list` is the
/// `(apiVersion, kind)` of the enclosing typed list, which its items may leave out.
fn document(
    file: &Path,
    index: usize,
    mut value: Value,
    list: Option<(&str, &str)>,
    names: &mut Interner,
    docs: &mut Vec<Doc>,
) {
    let place = match list {
        None => format!("document {}", index + 1),
        Some((_, kind)) => format!("{kind} item {index}"),
    };
    let Some(map) = value.as_object_mut() else {
        return docs.push(Doc {
            index: docs.len(),
            id: None,
            outcome: Err(Box::new(InvalidObject::file(
                file,
                format!(
                    "{place}: not a Kubernetes object (want a mapping with apiVersion and kind)"
                ),
            ))),
        });
    };
    if let Some((api_version, kind)) = list {
        map.entry("apiVersion")
            .or_insert_with(|| api_version.into());
        map.entry("kind").or_insert_with(|| kind.into());
    }
    let text = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if api_version.is_empty() || kind.is_empty() {
        let missing = if api_version.is_empty() {
            "apiVersion"
        } else {
            "kind"
        };
        return docs.push(Doc {
            index: docs.len(),
            id: None,
            outcome: Err(Box::new(InvalidObject::file(
                file,
                format!("{place}: {missing} must be set"),
            ))),
        });
    }
    if kind.ends_with("List") && map.get("items").is_some_and(Value::is_array) {
        let item_kind = kind.strip_suffix("List").unwrap_or_default();
        let items = match map.remove("items") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        for (i, item) in items.into_iter().enumerate() {
            let typed_list = (!item_kind.is_empty()).then_some((api_version.as_str(), item_kind));
            document(file, i, item, typed_list, names, docs);
        }
        return;
    }
    let Some(kind) = Kind::of(&api_version, &kind) else {
        tracing::debug!(file = %file.display(), %api_version, %kind, "ignoring {place}: not a kind Ferry reads");
        return;
    };
    let object = object_ref(kind, &value, names);
    let id = Some(object.clone()).filter(|o| &*o.name != convert::UNNAMED);
    docs.push(Doc {
        index: docs.len(),
        id,
        outcome: convert_value(kind, value, &object, names)
            .map(Arc::from)
            .map_err(Box::new),
    });
}

/// `Kind namespace/name` as written (namespace defaulted like the converters do; the name is
/// [`convert::UNNAMED`] when missing). The kind and namespace are the shared copies in `names`,
/// and so is a Service's name (its slices name it too); the converted objects share these
/// strings (20 000 identities held 2 MB of their own copies).
fn object_ref(kind: Kind, value: &Value, names: &mut Interner) -> ObjectRef {
    let meta = value.get("metadata");
    let field = |key: &str| {
        meta.and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let namespace = match kind {
        Kind::Node | Kind::ServiceCidr => "",
        _ => field("namespace").unwrap_or(convert::DEFAULT_NAMESPACE),
    };
    let name = field("name").unwrap_or(convert::UNNAMED);
    ObjectRef {
        kind: names.name(kind.name()),
        namespace: names.name(namespace),
        name: match kind {
            Kind::Service => names.name(name),
            _ => Arc::from(name),
        },
    }
}

/// Deserializes the typed object and converts it.
fn convert_value(
    kind: Kind,
    value: Value,
    object: &ObjectRef,
    names: &mut Interner,
) -> Result<Vec<Object>, InvalidObject> {
    Ok(match kind {
        Kind::Service => convert::service(&typed(value, object)?)?
            .map(|mut service| {
                share_name(names, &mut service.name);
                Object::from(service)
            })
            .into_iter()
            .collect(),
        Kind::EndpointSlice => convert::endpoint_slice(&typed(value, object)?)?
            .map(|mut slice| {
                compact_slice(names, &mut slice);
                // The identity's name string (the converter made its own copy).
                if slice.name == object.name {
                    slice.name = object.name.clone();
                }
                Object::from(slice)
            })
            .into_iter()
            .collect(),
        Kind::Endpoints => convert::endpoints(&typed(value, object)?)?
            .into_iter()
            .map(|mut slice| {
                compact_slice(names, &mut slice);
                Object::from(slice)
            })
            .collect(),
        Kind::Node => vec![Object::from(convert::node(&typed(value, object)?)?)],
        Kind::Pod => vec![Object::from(convert::pod(&typed(value, object)?)?)],
        Kind::ServiceCidr => vec![Object::from(convert::service_cidr(&typed(value, object)?)?)],
    })
}

/// Points a Service's name at the shared copies of its strings.
fn share_name(names: &mut Interner, name: &mut ServiceName) {
    name.namespace = names.intern(&name.namespace);
    name.name = names.intern(&name.name);
}

/// Shares a slice's namespace, Service name and endpoint locations with the other objects
/// read with `names`. The source and the cluster state hold the same objects, so the state
/// does not compact them itself (it compacts only what it alone holds): without this, each of
/// 10 000 slices kept its own copy of the namespace, of its Service's name and of the
/// location of each of its endpoints (~4 MB at 10 × 10 000 endpoints on three nodes).
fn compact_slice(names: &mut Interner, slice: &mut EndpointSlice) {
    names.intern_slice(slice);
    slice.namespace = names.intern(&slice.namespace);
    share_name(names, &mut slice.service);
}

/// `value` as a k8s-openapi type; a wrong type names its field path.
fn typed<T: DeserializeOwned>(value: Value, object: &ObjectRef) -> Result<T, InvalidObject> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        InvalidObject::new(object, field, e.into_inner().to_string())
    })
}
