//! The fake server's data: objects, resourceVersions, the event history watches replay, and the
//! switches tests flip (outage, dropped watches, bookmarks).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::selector::Selector;

/// A resource the fake serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// `v1 services`.
    Services,
    /// `discovery.k8s.io/v1 endpointslices`.
    EndpointSlices,
    /// `v1 nodes` (cluster-scoped).
    Nodes,
    /// `networking.k8s.io/v1 servicecidrs` (cluster-scoped).
    ServiceCidrs,
}

impl Resource {
    /// The collection's path (all namespaces).
    pub fn path(self) -> &'static str {
        match self {
            Resource::Services => "/api/v1/services",
            Resource::EndpointSlices => "/apis/discovery.k8s.io/v1/endpointslices",
            Resource::Nodes => "/api/v1/nodes",
            Resource::ServiceCidrs => "/apis/networking.k8s.io/v1/servicecidrs",
        }
    }

    /// The resource serving `path`, if any.
    pub fn from_path(path: &str) -> Option<Resource> {
        [
            Resource::Services,
            Resource::EndpointSlices,
            Resource::Nodes,
            Resource::ServiceCidrs,
        ]
        .into_iter()
        .find(|r| r.path() == path)
    }

    /// The resource of an object of this `kind`.
    pub fn of_kind(kind: &str) -> Option<Resource> {
        match kind {
            "Service" => Some(Resource::Services),
            "EndpointSlice" => Some(Resource::EndpointSlices),
            "Node" => Some(Resource::Nodes),
            "ServiceCIDR" => Some(Resource::ServiceCidrs),
            _ => None,
        }
    }

    /// `kind` of the objects.
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Services => "Service",
            Resource::EndpointSlices => "EndpointSlice",
            Resource::Nodes => "Node",
            Resource::ServiceCidrs => "ServiceCIDR",
        }
    }

    /// `apiVersion` of the objects.
    pub fn api_version(self) -> &'static str {
        match self {
            Resource::EndpointSlices => "discovery.k8s.io/v1",
            Resource::ServiceCidrs => "networking.k8s.io/v1",
            _ => "v1",
        }
    }

    fn namespaced(self) -> bool {
        !matches!(self, Resource::Nodes | Resource::ServiceCidrs)
    }
}

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl EventType {
    fn wire(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, kept for watches that resume from an older resourceVersion.
#[derive(Debug, Clone)]
struct Record {
    rv: u64,
    resource: Resource,
    kind: EventType,
    object: Value,
    /// The version replaced (for MODIFIED/DELETED), to tell selectors' enter/leave apart.
    old: Option<Value>,
}

type Key = (Resource, String, String);

/// Everything the server knows. Guarded by one mutex.
#[derive(Debug, Default)]
pub struct Store {
    rv: u64,
    objects: BTreeMap<Key, Value>,
    history: Vec<Record>,
    /// Watches from a resourceVersion below this get `410 Gone`.
    compacted: u64,
    /// Bumped to end every open watch.
    pub drops: u64,
    /// Bumped to send a bookmark to every open watch that allows them.
    pub bookmarks: u64,
    /// While true, connections are closed as soon as they are accepted.
    pub down: bool,
    /// Bumped when an outage starts: every connection older than that is closed, even if the
    /// outage ended before its task noticed.
    pub outages: u64,
    /// `METHOD path?query` of every request served, in order.
    pub requests: Vec<String>,
    /// Connections closed because the server was down.
    pub refused: u64,
    /// Resources answered with this HTTP status instead (`404`: an older server without them,
    /// `403`: RBAC without them).
    pub refusals: BTreeMap<Resource, u16>,
}

/// What a watch sees from a resourceVersion: events to send, or `Gone`.
pub enum Since {
    /// Lines to send (already filtered), and the resourceVersion reached.
    Events(Vec<Value>, u64),
    /// The resourceVersion is older than the history kept.
    Gone(u64),
}

impl Store {
    /// The current resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// Creates or replaces an object; returns its new resourceVersion.
    pub fn apply(&mut self, mut object: Value) -> Result<u64, String> {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let resource =
            Resource::of_kind(kind).ok_or_else(|| format!("unsupported kind {kind:?}"))?;
        let meta = object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or("object without metadata")?;
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if name.is_empty() {
            return Err("metadata.name must be set".into());
        }
        let mut namespace = String::new();
        if resource.namespaced() {
            let ns = meta
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            namespace = if ns.is_empty() {
                "default".into()
            } else {
                ns.into()
            };
            meta.insert("namespace".into(), json!(namespace));
        }
        let key = (resource, namespace, name);
        if let Some(stored) = self.objects.get(&key) {
            // An update that changes nothing is no event, as on the real server.
            for field in ["resourceVersion", "uid"] {
                if let Some(v) = stored.pointer(&format!("/metadata/{field}")) {
                    meta.entry(field).or_insert_with(|| v.clone());
                }
            }
            if *stored == object {
                return Ok(self.rv);
            }
            let meta = object
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
                .ok_or("object without metadata")?;
            meta.remove("resourceVersion");
        }
        self.rv += 1;
        let meta = object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or("object without metadata")?;
        meta.insert("resourceVersion".into(), json!(self.rv.to_string()));
        meta.entry("uid")
            .or_insert_with(|| json!(format!("00000000-0000-0000-0000-{:012}", self.rv)));
        let old = self.objects.insert(key, object.clone());
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.history.push(Record {
            rv: self.rv,
            resource,
            kind,
            object,
            old,
        });
        Ok(self.rv)
    }

    /// Deletes an object; false if there was none.
    pub fn delete(&mut self, kind: &str, namespace: &str, name: &str) -> bool {
        let Some(resource) = Resource::of_kind(kind) else {
            return false;
        };
        let namespace = match (resource.namespaced(), namespace) {
            (false, _) => "",
            (true, "") => "default",
            (true, ns) => ns,
        };
        let Some(old) = self
            .objects
            .remove(&(resource, namespace.into(), name.into()))
        else {
            return false;
        };
        self.rv += 1;
        let mut object = old.clone();
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.history.push(Record {
            rv: self.rv,
            resource,
            kind: EventType::Deleted,
            object,
            old: Some(old),
        });
        true
    }

    /// Every current object (for replacing them all).
    pub fn keys(&self) -> Vec<(String, String, String)> {
        self.objects
            .keys()
            .map(|(r, ns, n)| (r.kind().to_owned(), ns.clone(), n.clone()))
            .collect()
    }

    /// Compacts the history: new watches from any resourceVersion before now get `410 Gone`.
    /// Open watches go on (the records are kept for them), as with etcd's compaction.
    pub fn compact(&mut self) {
        self.compacted = self.rv;
    }

    /// The matching objects of a resource, sorted by namespace and name.
    pub fn list(&self, resource: Resource, selector: &Selector) -> Vec<Value> {
        self.list_page(resource, selector, None, usize::MAX)
            .0
            .into_iter()
            .cloned()
            .collect()
    }

    /// One page of [`Store::list`]: up to `limit` objects after the object `after` (namespace,
    /// name; `None`: from the first), and the key of the page's last object when more match
    /// after it. A page resumes from its key, as the API server's continue token resumes from
    /// an etcd key: each page costs its own objects, not the whole list.
    pub fn list_page(
        &self,
        resource: Resource,
        selector: &Selector,
        after: Option<(String, String)>,
        limit: usize,
    ) -> (Vec<&Value>, Option<(String, String)>) {
        use std::ops::Bound;
        let from = match after {
            None => Bound::Included((resource, String::new(), String::new())),
            Some((namespace, name)) => Bound::Excluded((resource, namespace, name)),
        };
        let mut matching = self
            .objects
            .range((from, Bound::Unbounded))
            .take_while(|((r, _, _), _)| *r == resource)
            .filter(|(_, o)| selector.matches(o));
        let mut page = Vec::new();
        let mut last = None;
        for ((_, namespace, name), object) in matching.by_ref().take(limit) {
            page.push(object);
            last = Some((namespace.clone(), name.clone()));
        }
        let more = matching.next().is_some();
        (page, last.filter(|_| more))
    }

    /// Watch events after resourceVersion `from` (`None`: the current objects as `ADDED`, as
    /// for a watch without resourceVersion or with `0`). `starting`: a new watch, which gets
    /// `Gone` for a compacted resourceVersion.
    pub fn since(
        &self,
        resource: Resource,
        selector: &Selector,
        from: Option<u64>,
        starting: bool,
    ) -> Since {
        let Some(from) = from else {
            let events = self
                .list(resource, selector)
                .into_iter()
                .map(|o| event(EventType::Added.wire(), o))
                .collect();
            return Since::Events(events, self.rv);
        };
        if starting && from < self.compacted {
            return Since::Gone(from);
        }
        let mut events = Vec::new();
        // The history is in resourceVersion order: skip what the watch has seen at once.
        let start = self.history.partition_point(|r| r.rv <= from);
        for r in self.history[start..]
            .iter()
            .filter(|r| r.resource == resource)
        {
            let now = r.kind != EventType::Deleted && selector.matches(&r.object);
            let before = r.old.as_ref().is_some_and(|o| selector.matches(o));
            // Entering or leaving the selector looks like ADDED or DELETED to the watcher.
            let kind = match (before, now) {
                (false, false) => continue,
                (false, true) => EventType::Added,
                (true, true) => r.kind,
                (true, false) => EventType::Deleted,
            };
            events.push(event(kind.wire(), r.object.clone()));
        }
        Since::Events(events, self.rv.max(from))
    }
}

/// A watch event line's JSON.
pub fn event(kind: &str, object: Value) -> Value {
    json!({ "type": kind, "object": object })
}

/// A `BOOKMARK` event at resourceVersion `rv`.
pub fn bookmark(resource: Resource, rv: u64) -> Value {
    event(
        "BOOKMARK",
        json!({
            "kind": resource.kind(),
            "apiVersion": resource.api_version(),
            "metadata": { "resourceVersion": rv.to_string() },
        }),
    )
}

/// A `metav1.Status` failure, as the API server sends it (in a response body or an `ERROR`
/// watch event).
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}
