//! [`EndpointController`]: the stage that turns Pods into EndpointSlices, event by event.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferry_model::{EndpointSlice, Node, Object, ObjectKey, ObjectRef, Pod, Service, ServiceName};

use super::derive::{endpoint_slices, Skipped};
use super::index::Selection;
use super::readiness::{ReadinessUpdate, Verdicts};
use super::PodKey;
use crate::convert::LABEL_SERVICE_NAME;
use crate::{InvalidObject, SourceEvent};

mod handwritten;

/// `namespace`, `name` of a slice.
type SliceKey = (Arc<str>, Arc<str>);

/// One Service's slices, sorted by key. Shared (`Arc`): a hand-written slice is one copy here
/// and in the cluster state (at 10 000 Services, a copy of each slice in a map of its own cost
/// ~20 MiB).
type Slices = Vec<(SliceKey, Arc<EndpointSlice>)>;

/// Standalone mode's EndpointSlice controller, as a stage between a source and the cluster
/// state: [`EndpointController::handle`] takes the source's events and returns the events the
/// state should see, in which Pods have become EndpointSlices; readiness verdicts come in
/// through [`EndpointController::readiness`]. Pure and synchronous: the caller owns the I/O.
///
/// **Where a Service's endpoints come from.** A Service with a selector that selects at least
/// one Pod of the manifests gets its EndpointSlices from those Pods (see [`super::derive`]);
/// any other Service keeps its hand-written EndpointSlices (or Endpoints), as before Pods
/// existed. A Service that has both is a [problem](EndpointController::problems) named on each
/// hand-written slice, which is left out: the Pods, whose readiness Ferry follows, win.
/// Services and Nodes pass through unchanged; Pods never reach the state.
#[derive(Debug, Default)]
pub struct EndpointController {
    /// Services with a selector.
    services: BTreeMap<ServiceName, Arc<Service>>,
    pods: BTreeMap<PodKey, Arc<Pod>>,
    nodes: BTreeMap<String, Node>,
    /// Hand-written slices (and slices mirrored from Endpoints), by key.
    handwritten: BTreeMap<SliceKey, Arc<EndpointSlice>>,
    handwritten_of: BTreeSet<(ServiceName, SliceKey)>,
    selection: Selection,
    verdicts: Verdicts,
    /// The slices last handed on for each Service whose endpoints come from Pods (present
    /// even when there are none). Every other Service's slices handed on are its hand-written
    /// ones: nothing is kept for them (at 10 000 Services without Pods a list each cost ~2.7
    /// MB).
    derived: BTreeMap<ServiceName, Slices>,
    /// The hand-written slices handed on for a Service that is not derived, as they were
    /// before this input changed them (taken at the first change; emptied by the refresh).
    handed_before: BTreeMap<ServiceName, Slices>,
    /// The current problems, per Service.
    problems: BTreeMap<ServiceName, Vec<InvalidObject>>,
    /// Set when the Pods to probe may have changed.
    targets_changed: bool,
}

/// What one input produced.
#[derive(Debug, Default, PartialEq)]
pub struct Output {
    /// Events for the cluster state, in order.
    pub events: Vec<SourceEvent>,
    /// Problems that appeared with this input (to log and count once).
    pub new_problems: Vec<InvalidObject>,
}

impl EndpointController {
    /// An empty controller.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one source event; returns what the cluster state should see. A
    /// [`SourceEvent::Batch`] is taken whole: each Service it touches is recomputed once, after
    /// all its events. The output belongs together too (a Service with the slices derived for
    /// it): [`super::run`] passes it on as one event.
    pub fn handle(&mut self, event: SourceEvent) -> Output {
        let mut out = Output::default();
        if let SourceEvent::Resync(objects) = event {
            self.resync(objects, &mut out);
            return out;
        }
        let mut touched = BTreeSet::new();
        self.take(event, &mut touched, &mut out);
        self.refresh_all(touched, &mut out);
        out
    }

    /// Stores one event's objects, forwarding what passes through; adds the Services to
    /// refresh to `touched`. A Resync inside a Batch (no source sends one) is taken at once.
    fn take(&mut self, event: SourceEvent, touched: &mut BTreeSet<ServiceName>, out: &mut Output) {
        match event {
            SourceEvent::Resync(objects) => self.resync(objects, out),
            SourceEvent::Apply(object) => touched.extend(self.apply(object, &mut out.events)),
            SourceEvent::Delete(key) => touched.extend(self.delete(key, &mut out.events)),
            SourceEvent::Batch(events) => {
                for event in events {
                    self.take(event, touched, out);
                }
            }
        }
    }

    /// Takes one readiness verdict; returns the slice changes it causes.
    pub fn readiness(&mut self, update: &ReadinessUpdate) -> Output {
        self.readiness_all(std::slice::from_ref(update))
    }

    /// Takes several readiness verdicts at once: each Service they touch is recomputed once
    /// (a Service of 10 000 Pods whose Pods turn ready together costs one recomputation per
    /// batch, not one per Pod).
    pub fn readiness_all(&mut self, updates: &[ReadinessUpdate]) -> Output {
        let mut touched = BTreeSet::new();
        for update in updates {
            if self.pods.contains_key(&update.pod) && self.verdicts.record(update) {
                touched.extend(self.selection.services_of(&update.pod).cloned());
            }
        }
        let mut out = Output::default();
        self.refresh_all(touched, &mut out);
        out
    }

    /// Every current problem, sorted by Service.
    pub fn problems(&self) -> impl Iterator<Item = &InvalidObject> {
        self.problems.values().flatten()
    }

    /// The Pods some Service selects: the ones whose readiness probes matter.
    pub fn selected_pods(&self) -> impl Iterator<Item = (&PodKey, &Arc<Pod>)> {
        self.selection
            .selected_pods()
            .filter_map(|k| self.pods.get_key_value(k))
    }

    /// A Pod of the manifests (`ferry explain` looks up the Pod an endpoint's `targetRef`
    /// names).
    pub fn pod(&self, key: &PodKey) -> Option<&Pod> {
        self.pods.get(key).map(|p| &**p)
    }

    /// The Services that select a Pod.
    pub fn services_of(&self, pod: &PodKey) -> impl Iterator<Item = &ServiceName> {
        self.selection.services_of(pod)
    }

    /// True (once) when [`EndpointController::selected_pods`] may have changed since the last
    /// call.
    pub fn take_targets_changed(&mut self) -> bool {
        std::mem::take(&mut self.targets_changed)
    }

    /// The verdicts recorded so far.
    pub fn verdicts(&self) -> &Verdicts {
        &self.verdicts
    }

    fn resync(&mut self, objects: Vec<Object>, out: &mut Output) {
        let before: Vec<InvalidObject> = self.problems().cloned().collect();
        let verdicts = std::mem::take(&mut self.verdicts);
        *self = Self {
            verdicts,
            targets_changed: true,
            ..Self::default()
        };
        let mut passed = Vec::with_capacity(objects.len());
        for object in objects {
            match object {
                // Nothing was handed on before: no note of it to take (see `note_handed`).
                Object::EndpointSlice(slice) => {
                    let key = (slice.namespace.clone(), slice.name.clone());
                    self.remove_handwritten(&key);
                    self.add_handwritten(key, slice);
                }
                other => {
                    self.apply_quietly(other, &mut passed);
                }
            }
        }
        let pods = &self.pods;
        self.verdicts.retain(|pod| pods.contains_key(pod));
        // Only a Service whose endpoints come from Pods has slices to work out (and problems
        // to find): any other hands on its hand-written slices as they are.
        let derived: Vec<ServiceName> = self
            .selection
            .selecting()
            .filter(|name| self.services.contains_key(*name))
            .cloned()
            .collect();
        for name in derived {
            let (slices, problems, _) = self.desired(&name);
            if !problems.is_empty() {
                self.problems.insert(name.clone(), problems);
            }
            self.derived.insert(name, slices);
        }
        self.handed_before.clear();
        ferry_model::btree::repack(&mut self.services);
        ferry_model::btree::repack(&mut self.handwritten);
        ferry_model::btree::repack_set(&mut self.handwritten_of);
        ferry_model::btree::repack(&mut self.derived);
        passed.extend(self.handed_on().map(Object::from));
        out.events.push(SourceEvent::Resync(passed));
        out.new_problems = self
            .problems()
            .filter(|p| !before.contains(*p))
            .cloned()
            .collect();
    }

    /// Stores an object, forwarding what passes through; returns the Services to refresh.
    fn apply(&mut self, object: Object, events: &mut Vec<SourceEvent>) -> BTreeSet<ServiceName> {
        let mut passed = Vec::new();
        let touched = self.apply_quietly(object, &mut passed);
        events.extend(passed.into_iter().map(SourceEvent::Apply));
        touched
    }

    fn apply_quietly(&mut self, object: Object, passed: &mut Vec<Object>) -> BTreeSet<ServiceName> {
        match object {
            Object::Service(svc) => {
                let name = svc.name.clone();
                if svc.selector.is_some() {
                    self.services.insert(name.clone(), svc.clone());
                } else {
                    self.services.remove(&name);
                }
                self.selection.set_service(
                    &name,
                    self.services.get(&name).map(|s| &**s),
                    &self.pods,
                );
                self.targets_changed = true;
                passed.push(Object::from(svc));
                BTreeSet::from([name])
            }
            Object::EndpointSlice(slice) => {
                let key = (slice.namespace.clone(), slice.name.clone());
                let mut touched = self.remove_handwritten(&key);
                self.note_handed(&slice.service);
                touched.insert(slice.service.clone());
                self.add_handwritten(key, slice);
                touched
            }
            Object::Node(node) => {
                let touched = self.services_on_node(&node.name);
                self.nodes.insert(node.name.clone(), Node::clone(&node));
                passed.push(Object::Node(node));
                touched
            }
            Object::Pod(pod) => {
                let key = PodKey::of(&pod);
                self.targets_changed = true;
                let touched = self.selection.set_pod(&key, Some(&pod), &self.services);
                self.pods.insert(key, pod);
                touched
            }
            // Nothing to derive: passed on as it is.
            Object::ServiceCidr(cidr) => {
                passed.push(Object::ServiceCidr(cidr));
                BTreeSet::new()
            }
        }
    }

    fn delete(&mut self, key: ObjectKey, events: &mut Vec<SourceEvent>) -> BTreeSet<ServiceName> {
        match key {
            ObjectKey::Service(name) => {
                self.services.remove(&name);
                self.selection.set_service(&name, None, &self.pods);
                self.targets_changed = true;
                events.push(SourceEvent::Delete(ObjectKey::Service(name.clone())));
                BTreeSet::from([name])
            }
            ObjectKey::EndpointSlice { namespace, name } => {
                self.remove_handwritten(&(namespace.into(), name.into()))
            }
            ObjectKey::Node(name) => {
                self.nodes.remove(&name);
                events.push(SourceEvent::Delete(ObjectKey::Node(name.clone())));
                self.services_on_node(&name)
            }
            ObjectKey::Pod { namespace, name } => {
                let key = PodKey::new(namespace, name);
                self.pods.remove(&key);
                self.verdicts.forget(&key);
                self.targets_changed = true;
                self.selection.set_pod(&key, None, &self.services)
            }
            ObjectKey::ServiceCidr(name) => {
                events.push(SourceEvent::Delete(ObjectKey::ServiceCidr(name)));
                BTreeSet::new()
            }
        }
    }

    /// The Services selecting a Pod that runs on `node`.
    fn services_on_node(&self, node: &str) -> BTreeSet<ServiceName> {
        self.selection
            .selected_pods()
            .filter(|k| self.pods.get(*k).and_then(|p| p.node_name.as_deref()) == Some(node))
            .flat_map(|k| self.selection.services_of(k).cloned())
            .collect()
    }

    fn refresh_all(&mut self, touched: BTreeSet<ServiceName>, out: &mut Output) {
        for name in touched {
            let before = self.problems.get(&name).cloned().unwrap_or_default();
            self.refresh(&name, &mut out.events);
            let now = self.problems.get(&name).into_iter().flatten();
            out.new_problems
                .extend(now.filter(|p| !before.contains(p)).cloned());
        }
        self.handed_before.clear();
    }

    /// Recomputes one Service's slices and emits the difference with what was handed on.
    fn refresh(&mut self, name: &ServiceName, events: &mut Vec<SourceEvent>) {
        let (desired, problems, derived) = self.desired(name);
        let old = match self.derived.remove(name) {
            Some(old) => old,
            None => match self.handed_before.remove(name) {
                Some(old) => old,
                None => self.handwritten_slices(name),
            },
        };
        let find = |slices: &Slices, key: &SliceKey| {
            slices
                .binary_search_by(|(k, _)| k.cmp(key))
                .ok()
                .map(|i| Arc::clone(&slices[i].1))
        };
        for (key, slice) in &desired {
            let same = find(&old, key).is_some_and(|o| Arc::ptr_eq(&o, slice) || o == *slice);
            if !same {
                events.push(SourceEvent::Apply(Object::from(Arc::clone(slice))));
            }
        }
        let gone = old.iter().map(|(k, _)| k);
        for key in gone.filter(|k| find(&desired, k).is_none()) {
            events.push(SourceEvent::Delete(ObjectKey::EndpointSlice {
                namespace: key.0.to_string(),
                name: key.1.to_string(),
            }));
        }
        if derived {
            self.derived.insert(name.clone(), desired);
        }
        if problems.is_empty() {
            self.problems.remove(name);
        } else {
            self.problems.insert(name.clone(), problems);
        }
    }

    /// The slices one Service should have, the problems found, and whether they come from
    /// Pods.
    fn desired(&self, name: &ServiceName) -> (Slices, Vec<InvalidObject>, bool) {
        let service = self
            .services
            .get(name)
            .filter(|_| self.selection.selects_any(name));
        let Some(service) = service else {
            return (self.handwritten_slices(name), Vec::new(), false);
        };
        let pods = self
            .selection
            .pods_of(name)
            .filter_map(|k| self.pods.get(k).map(|p| (k, &**p)));
        let pods: Vec<(&PodKey, &Pod)> = pods.collect();
        let ready = |pod: &Pod| self.verdicts.pod_ready(&PodKey::of(pod), pod);
        let (slices, skipped) =
            endpoint_slices(service, pods.iter().map(|(_, p)| *p), &self.nodes, ready);
        let mut problems: Vec<InvalidObject> = self
            .handwritten_of_service(name)
            .map(|(_, slice)| conflict(slice, service, &pods))
            .collect();
        problems.extend(
            skipped
                .into_iter()
                .map(|(pod, why)| skipped_problem(pod, why, name)),
        );
        let mut slices: Slices = slices
            .into_iter()
            .map(|s| ((s.namespace.clone(), s.name.clone()), Arc::new(s)))
            .collect();
        slices.sort_by(|a, b| a.0.cmp(&b.0));
        (slices, problems, true)
    }
}

/// A hand-written slice of a Service whose endpoints come from Pods.
fn conflict(slice: &EndpointSlice, service: &Service, pods: &[(&PodKey, &Pod)]) -> InvalidObject {
    let mut names: Vec<String> = pods.iter().take(3).map(|(k, _)| k.to_string()).collect();
    if pods.len() > 3 {
        names.push(format!("and {} more", pods.len() - 3));
    }
    InvalidObject::new(
        &ObjectRef::new("EndpointSlice", &slice.namespace, &slice.name),
        format!("metadata.labels[{LABEL_SERVICE_NAME}]"),
        format!(
            "Service {} takes its endpoints from the Pods its selector {} selects ({}), so this \
             hand-written slice is left out: a Service gets its endpoints from Pods or from \
             hand-written slices, never both",
            service.name,
            service
                .selector
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            names.join(", ")
        ),
    )
}

fn skipped_problem(pod: &Pod, why: Skipped, service: &ServiceName) -> InvalidObject {
    let object = ObjectRef::new("Pod", &pod.namespace, &pod.name);
    match why {
        Skipped::UnknownNode(None) => InvalidObject::new(
            &object,
            "spec.nodeName",
            format!("must be set: a Pod on no known Node is left out of Service {service}'s endpoints (as upstream's EndpointSlice controller does)"),
        ),
        Skipped::UnknownNode(Some(node)) => InvalidObject::new(
            &object,
            "spec.nodeName",
            format!("Node {node} is not in the manifests: the Pod is left out of Service {service}'s endpoints (as upstream's EndpointSlice controller does)"),
        ),
    }
}
