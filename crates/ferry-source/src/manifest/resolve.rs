//! Checks across objects (duplicates, slices without a Service) and the last-good memory.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ferry_model::{Object, ObjectKey, ObjectRef, ServiceName};

use super::load::{Doc, RawScan};
use super::Scan;
use crate::convert::LABEL_SERVICE_NAME;
use crate::InvalidObject;

/// The last good version of every object written in the manifests, by `Kind namespace/name` as
/// written (an Endpoints object maps to all the slices mirrored from it).
#[derive(Debug, Default)]
pub(super) struct Memory {
    kept: BTreeMap<ObjectRef, Kept>,
}

#[derive(Debug, Clone)]
struct Kept {
    /// The file it was last seen in.
    file: PathBuf,
    /// Its model objects (none for an ignored object).
    objects: Vec<Object>,
}

/// Applies the checks across objects and the last-good rule, and updates `memory`.
pub(super) fn resolve(raw: RawScan, memory: &mut Memory) -> Scan {
    let RawScan {
        docs,
        broken,
        mut errors,
    } = raw;
    let (docs, seen) = drop_duplicates(docs, &mut errors);

    // Objects whose file (or directory) could not be read this time, and that did not turn up
    // elsewhere: their last good version is kept.
    let is_broken = |file: &Path| broken.iter().any(|b| file.starts_with(b));
    let kept_unread: Vec<(&ObjectRef, &Kept)> = memory
        .kept
        .iter()
        .filter(|(id, kept)| is_broken(&kept.file) && !seen.contains(*id))
        .collect();

    let services: BTreeSet<ServiceName> = seen
        .iter()
        .chain(kept_unread.iter().map(|(id, _)| *id))
        .filter(|id| id.kind == "Service")
        .map(|id| ServiceName::new(&id.namespace, &id.name))
        .collect();

    let mut objects: BTreeMap<ObjectKey, Object> = BTreeMap::new();
    let mut remembered: BTreeMap<ObjectRef, Kept> = BTreeMap::new();
    let mut claimed = ClaimedIps::default();
    for mut doc in docs {
        if let (Ok(converted), Some(id)) = (&doc.outcome, &doc.id) {
            if let Some(error) = claimed.conflict(converted, id, &doc.file) {
                // Its last good version claimed the same address: it is not kept either.
                errors.push(error.in_file(&doc.file));
                continue;
            }
            if let Some(error) = dangling_slice(converted, id, &services) {
                doc.outcome = Err(error);
            }
        }
        let converted = match doc.outcome {
            Ok(converted) => converted,
            Err(error) => {
                errors.push(error.in_file(&doc.file));
                match doc.id.as_ref().and_then(|id| memory.kept.get(id)) {
                    Some(kept) => kept.objects.clone(),
                    None => continue,
                }
            }
        };
        let source = doc.id.clone();
        let converted = insert_all(
            &mut objects,
            converted,
            source.as_ref(),
            &doc.file,
            &mut errors,
        );
        if let Some(id) = doc.id {
            remembered.insert(
                id,
                Kept {
                    file: doc.file,
                    objects: converted,
                },
            );
        }
    }
    for (id, kept) in kept_unread {
        for object in &kept.objects {
            objects
                .entry(object.key())
                .or_insert_with(|| object.clone());
        }
        remembered.insert(id.clone(), kept.clone());
    }
    memory.kept = remembered;

    errors.sort_by(|a, b| a.file.cmp(&b.file));
    Scan {
        objects: objects.into_values().collect(),
        errors,
    }
}

/// Keeps the first of several documents with the same `Kind namespace/name`; returns the kept
/// documents and every identity seen.
fn drop_duplicates(
    docs: Vec<Doc>,
    errors: &mut Vec<InvalidObject>,
) -> (Vec<Doc>, BTreeSet<ObjectRef>) {
    let mut first: BTreeMap<ObjectRef, PathBuf> = BTreeMap::new();
    let mut kept = Vec::with_capacity(docs.len());
    for doc in docs {
        if let Some(id) = &doc.id {
            if let Some(file) = first.get(id) {
                errors.push(
                    InvalidObject::new(
                        id,
                        "metadata.name",
                        format!(
                            "duplicate {id}: the first one, in {}, is used",
                            file.display()
                        ),
                    )
                    .in_file(&doc.file),
                );
                continue;
            }
            first.insert(id.clone(), doc.file.clone());
        }
        kept.push(doc);
    }
    (kept, first.into_keys().collect())
}

/// The ClusterIPs of the Services read so far, with the Service and file that hold each. The
/// API server allocates every ClusterIP once; manifests can write one twice, and two Services
/// on one address would leave which one the kernel serves to chance.
#[derive(Debug, Default)]
struct ClaimedIps {
    by_ip: BTreeMap<IpAddr, (ServiceName, PathBuf)>,
}

impl ClaimedIps {
    /// An error when a Service in `converted` has a ClusterIP an earlier Service holds (the
    /// first, in path then document order, keeps it); else records its ClusterIPs.
    fn conflict(
        &mut self,
        converted: &[Object],
        id: &ObjectRef,
        file: &Path,
    ) -> Option<InvalidObject> {
        for object in converted {
            let Object::Service(service) = object else {
                continue;
            };
            for (i, ip) in service.cluster_ips.iter().enumerate() {
                if let Some((other, other_file)) = self.by_ip.get(ip) {
                    let field = if i == 0 {
                        "spec.clusterIP".to_owned()
                    } else {
                        format!("spec.clusterIPs[{i}]")
                    };
                    return Some(InvalidObject::new(
                        id,
                        field,
                        format!(
                            "ClusterIP {ip} is already Service {other}'s (in {}); this one is skipped",
                            other_file.display()
                        ),
                    ));
                }
            }
            for ip in &service.cluster_ips {
                self.by_ip
                    .insert(*ip, (service.name.clone(), file.to_path_buf()));
            }
        }
        None
    }
}

/// An error when one of `converted`'s slices belongs to a Service not in the manifests.
fn dangling_slice(
    converted: &[Object],
    id: &ObjectRef,
    services: &BTreeSet<ServiceName>,
) -> Option<InvalidObject> {
    converted.iter().find_map(|object| match object {
        Object::EndpointSlice(slice) if !services.contains(&slice.service) => {
            // A mirrored Endpoints names its Service by its own name.
            let field = if id.kind == "Endpoints" {
                "metadata.name".to_owned()
            } else {
                format!("metadata.labels[{LABEL_SERVICE_NAME}]")
            };
            Some(InvalidObject::new(
                id,
                field,
                format!("Service {} is not in the manifests", slice.service),
            ))
        }
        _ => None,
    })
}

/// Inserts objects, reporting (and skipping) any whose key an earlier object already holds,
/// e.g. a slice named like one mirrored from an Endpoints object. Returns the inserted ones.
fn insert_all(
    objects: &mut BTreeMap<ObjectKey, Object>,
    converted: Vec<Object>,
    source: Option<&ObjectRef>,
    file: &Path,
    errors: &mut Vec<InvalidObject>,
) -> Vec<Object> {
    let mut inserted = Vec::with_capacity(converted.len());
    for object in converted {
        let key = object.key();
        if objects.contains_key(&key) {
            let target = key.object_ref();
            let source = source.cloned().unwrap_or_else(|| target.clone());
            errors.push(
                InvalidObject::new(
                    &source,
                    "metadata.name",
                    format!("{target} is already defined by another object; this one is skipped"),
                )
                .in_file(file),
            );
            continue;
        }
        objects.insert(key, object.clone());
        inserted.push(object);
    }
    inserted
}
