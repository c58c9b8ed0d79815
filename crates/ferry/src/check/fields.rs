//! The field names of a Kubernetes type, as k8s-openapi knows them, for "unknown field, did you
//! mean …?".
//!
//! k8s-openapi's types say their fields only to their deserializer (`deserialize_struct`'s
//! field list). [`Probe`] is a deserializer that answers every request with a harmless value
//! and notes each struct's fields, nested, as a tree [`crate::suggest::unknown_fields`] reads:
//! objects list their fields, a list holds the shape of its items, a map is an empty object
//! (free keys), anything else is null.

use std::fmt;

use k8s_openapi::Resource;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Value};

/// A string every string-typed field accepts (times parse it; names and quantities keep it).
const ANY_TEXT: &str = "1970-01-01T00:00:00Z";
/// Deeper than any of the kinds Ferry reads; stops a recursive type.
const MAX_DEPTH: usize = 16;

/// The field tree of resource type `T` (`None` if probing failed).
pub fn tree<T: Resource + DeserializeOwned>() -> Option<Value> {
    let mut out = Value::Null;
    let probe = Probe {
        out: &mut out,
        depth: 0,
        type_meta: Some((T::API_VERSION, T::KIND)),
        text: ANY_TEXT,
    };
    T::deserialize(probe).ok()?;
    Some(out)
}

#[derive(Debug)]
struct ProbeError(String);

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProbeError {}

impl de::Error for ProbeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ProbeError(msg.to_string())
    }
}

struct Probe<'a> {
    out: &'a mut Value,
    depth: usize,
    /// The top-level resource's apiVersion and kind (its deserializer checks them).
    type_meta: Option<(&'static str, &'static str)>,
    /// What a string field of this place reads.
    text: &'static str,
}

impl<'de> de::Deserializer<'de> for Probe<'_> {
    type Error = ProbeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_str(self.text)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_bool(false)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_i64(0)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_i32(0)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_u64(0)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_f64(0.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, ProbeError> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        *self.out = Value::Array(vec![Value::Null]);
        let Value::Array(items) = self.out else {
            return Err(ProbeError("unreachable".to_owned()));
        };
        v.visit_seq(OneItem {
            item: Some(&mut items[0]),
            depth: self.depth + 1,
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        *self.out = Value::Object(Map::new());
        v.visit_map(Fields {
            names: &[],
            next: 0,
            out: &mut Map::new(),
            depth: self.depth,
            type_meta: None,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, ProbeError> {
        if self.depth > MAX_DEPTH {
            return Err(ProbeError("too deep".to_owned()));
        }
        *self.out = Value::Object(
            fields
                .iter()
                .map(|f| ((*f).to_owned(), Value::Null))
                .collect(),
        );
        let Value::Object(out) = self.out else {
            return Err(ProbeError("unreachable".to_owned()));
        };
        v.visit_map(Fields {
            names: fields,
            next: 0,
            out,
            depth: self.depth,
            type_meta: self.type_meta,
        })
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ProbeError> {
        v.visit_unit()
    }

    forward_to_deserialize_any! {
        i8 i16 u8 u16 u32 f32 char str string bytes byte_buf unit unit_struct tuple
        tuple_struct enum identifier
    }
}

/// A struct's fields, each with a probe as its value.
struct Fields<'a> {
    names: &'static [&'static str],
    next: usize,
    out: &'a mut Map<String, Value>,
    depth: usize,
    type_meta: Option<(&'static str, &'static str)>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = ProbeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ProbeError> {
        let Some(name) = self.names.get(self.next) else {
            return Ok(None);
        };
        seed.deserialize((*name).into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ProbeError> {
        let name = self.names.get(self.next).copied().unwrap_or_default();
        self.next += 1;
        let text = match (self.type_meta, name) {
            (Some((api_version, _)), "apiVersion") => api_version,
            (Some((_, kind)), "kind") => kind,
            _ => ANY_TEXT,
        };
        let mut scratch = Value::Null;
        let out = self.out.get_mut(name).unwrap_or(&mut scratch);
        seed.deserialize(Probe {
            out,
            depth: self.depth + 1,
            type_meta: None,
            text,
        })
    }
}

/// A list with one probed item.
struct OneItem<'a> {
    item: Option<&'a mut Value>,
    depth: usize,
}

impl<'de> SeqAccess<'de> for OneItem<'_> {
    type Error = ProbeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ProbeError> {
        let Some(out) = self.item.take() else {
            return Ok(None);
        };
        seed.deserialize(Probe {
            out,
            depth: self.depth,
            type_meta: None,
            text: ANY_TEXT,
        })
        .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, Service};
    use k8s_openapi::api::discovery::v1::EndpointSlice;

    use super::*;

    #[test]
    fn the_kinds_ferry_reads_list_their_fields() {
        let svc = tree::<Service>().expect("Service");
        for path in [
            "/spec/ports/0/nodePort",
            "/spec/clusterIP",
            "/metadata/labels",
            "/status/loadBalancer/ingress/0/ipMode",
        ] {
            assert!(svc.pointer(path).is_some(), "{path}: {svc}");
        }
        let slice = tree::<EndpointSlice>().expect("EndpointSlice");
        assert!(
            slice.pointer("/endpoints/0/conditions/serving").is_some(),
            "{slice}"
        );
        assert!(
            slice
                .pointer("/endpoints/0/hints/forZones/0/name")
                .is_some(),
            "{slice}"
        );
        let node = tree::<Node>().expect("Node");
        assert!(node.pointer("/status/addresses/0/type").is_some(), "{node}");
    }
}
