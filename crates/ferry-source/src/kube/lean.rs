//! Watched objects parsed lean: `metadata.managedFields` and every annotation Ferry does not
//! read are skipped while the API server's JSON is parsed, so no copy of them is ever made.
//!
//! Ferry reads a few labels and one annotation (an EndpointSlice's trigger time); the rest of
//! an object's metadata is often most of its size (managed fields, `last-applied-configuration`)
//! and a client cannot bound it. Parsed into the k8s-openapi type as it is, a list page keeps
//! all of it until the page has been converted. [`Lean`] parses the metadata through a filter
//! first (skipped values are read past with `IgnoredAny`, never allocated), then builds the
//! k8s-openapi object from what is left, so the converters see the same types as before.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// A watched kind: the annotations its converter reads (every other one is dropped).
pub trait ReadAnnotations {
    /// Annotation keys kept when parsing.
    const READ_ANNOTATIONS: &'static [&'static str];
}

/// An object of kind `K` parsed without its managed fields and unread annotations.
#[derive(Debug, Clone)]
pub struct Lean<K>(pub K);

impl<K: kube::Resource> kube::Resource for Lean<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

impl<'de, K: DeserializeOwned + ReadAnnotations> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let object = deserializer.deserialize_map(Top::<K>(PhantomData))?;
        K::deserialize(Value::Object(object))
            .map(Lean)
            .map_err(D::Error::custom)
    }
}

/// The object's top level: `metadata` through [`Metadata`], the rest as it is.
struct Top<K>(PhantomData<K>);

impl<'de, K: ReadAnnotations> Visitor<'de> for Top<K> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if key == "metadata" {
                map.next_value_seed(Metadata(K::READ_ANNOTATIONS))?
            } else {
                map.next_value::<Value>()?
            };
            object.insert(key, value);
        }
        Ok(object)
    }
}

/// `metadata` without `managedFields`, its annotations through [`Annotations`].
struct Metadata(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Metadata {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Metadata {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("object metadata")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut meta = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "managedFields" => {
                    map.next_value::<IgnoredAny>()?;
                }
                "annotations" => {
                    let kept = map.next_value_seed(Annotations(self.0))?;
                    if !kept.is_empty() {
                        meta.insert(key, Value::Object(kept));
                    }
                }
                _ => {
                    let value = map.next_value::<Value>()?;
                    meta.insert(key, value);
                }
            }
        }
        Ok(Value::Object(meta))
    }
}

/// `metadata.annotations`, only the keys in the list.
struct Annotations(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Annotations {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Annotations {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of annotations")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Map::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.0.contains(&key.as_str()) {
                let value = map.next_value::<Value>()?;
                kept.insert(key, value);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests;
