//! `InvalidObject`: the one error type for bad input, shared by every source.

use std::fmt;
use std::path::{Path, PathBuf};

use ferry_model::ObjectRef;

/// One problem with one input object (or one input file), precise enough to fix it.
///
/// Displayed as `FILE: KIND NS/NAME: FIELD: REASON`, e.g.
/// `examples/bad.yaml: Service dev/web: spec.ports[1].port: must be between 1 and 65535, got
/// 70000`. Parts that are unknown are left out: `file` is `None` for objects that did not come
/// from a file (the API source), and a file that cannot be read or parsed at all has an empty
/// `object.kind` and an empty `field` (see [`InvalidObject::is_file_error`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{}{reason}", FilePrefix(.file.as_deref()), ObjectPrefix(.object), FieldPrefix(.field))]
pub struct InvalidObject {
    /// The manifest file the object came from, if any.
    pub file: Option<PathBuf>,
    /// The object: `Kind namespace/name` (name empty when the object has none).
    pub object: ObjectRef,
    /// JSON-path-like location of the problem inside the object, e.g. `spec.clusterIP`,
    /// `endpoints[2].addresses[0]`, `metadata.labels[kubernetes.io/service-name]`.
    pub field: String,
    /// What is wrong, and what was found.
    pub reason: String,
}

impl InvalidObject {
    /// A problem with `field` of `object`; `file` is filled in later by the manifest loader.
    pub fn new(object: &ObjectRef, field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            file: None,
            object: object.clone(),
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// A problem with a whole file (unreadable, or not valid YAML/JSON): no object, no field.
    pub fn file(path: &Path, reason: impl Into<String>) -> Self {
        Self {
            file: Some(path.to_path_buf()),
            object: ObjectRef::new("", "", ""),
            field: String::new(),
            reason: reason.into(),
        }
    }

    /// Sets the file the object came from.
    pub fn in_file(mut self, path: &Path) -> Self {
        self.file = Some(path.to_path_buf());
        self
    }

    /// True when the error concerns a whole file rather than one object in it.
    pub fn is_file_error(&self) -> bool {
        self.object.kind.is_empty()
    }
}

struct FilePrefix<'a>(Option<&'a Path>);

impl fmt::Display for FilePrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "{}: ", path.display()),
            None => Ok(()),
        }
    }
}

struct ObjectPrefix<'a>(&'a ObjectRef);

impl fmt::Display for ObjectPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.kind.is_empty() {
            Ok(())
        } else {
            write!(f, "{}: ", self.0)
        }
    }
}

struct FieldPrefix<'a>(&'a str);

impl fmt::Display for FieldPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, "{}: ", self.0)
        }
    }
}
