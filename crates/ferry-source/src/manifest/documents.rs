//! The documents of manifests with their place (`file`, `document 2`, `List item 3`), for
//! tools that look at what is written rather than only at what converts (`ferry check`).

use std::path::{Path, PathBuf};

use ferry_model::Object;
use serde_json::Value;

use super::load::{convert_document, file_documents, files};
use crate::InvalidObject;

/// One document of a manifest file (a list's items are documents of their own).
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The file.
    pub file: PathBuf,
    /// Where in the file: `document 2`, or `document 1, item 3` for a list's item (1-based).
    pub position: String,
    /// The document as written (a list's item with the list's apiVersion and kind filled in).
    pub value: Value,
}

impl Document {
    /// `apiVersion` and `kind`, as written.
    pub fn type_meta(&self) -> (&str, &str) {
        let text = |k: &str| self.value.get(k).and_then(Value::as_str).unwrap_or("");
        (text("apiVersion"), text("kind"))
    }

    /// Converts the document as the loader does (none for kinds Ferry does not read).
    pub fn convert(&self) -> Result<Vec<Object>, InvalidObject> {
        let mut objects = Vec::new();
        for outcome in convert_document(&self.file, self.value.clone()) {
            objects.extend(outcome.map_err(|e| e.in_file(&self.file))?);
        }
        Ok(objects)
    }
}

/// Calls `each` with every document under PATH, in read order, one file's documents at a time,
/// so that no more than one file is held as documents (a directory of 10 000 files parsed at
/// once took 300 MiB); returns the files that could not be listed, read or parsed (those that
/// could not be listed first, then in read order).
pub fn for_each_document(path: &Path, mut each: impl FnMut(Document)) -> Vec<InvalidObject> {
    let (files, mut errors) = files(path);
    for file in files {
        match file_documents(&file) {
            Ok(values) => {
                let mut docs = Vec::new();
                for (i, value) in values.into_iter().enumerate() {
                    push(&file, format!("document {}", i + 1), value, &mut docs);
                }
                docs.into_iter().for_each(&mut each);
            }
            Err(reason) => errors.push(InvalidObject::file(&file, reason)),
        }
    }
    errors
}

fn push(file: &Path, position: String, mut value: Value, docs: &mut Vec<Document>) {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if kind.ends_with("List") {
        if let Some(Value::Array(items)) = value.get_mut("items").map(Value::take) {
            let item_kind = kind.trim_end_matches("List");
            for (i, mut item) in items.into_iter().enumerate() {
                if let Some(map) = item.as_object_mut() {
                    if !item_kind.is_empty() {
                        map.entry("apiVersion")
                            .or_insert_with(|| api_version.clone().into());
                        map.entry("kind").or_insert_with(|| item_kind.into());
                    }
                }
                push(file, format!("{position}, item {}", i + 1), item, docs);
            }
            return;
        }
    }
    docs.push(Document {
        file: file.to_path_buf(),
        position,
        value,
    });
}
