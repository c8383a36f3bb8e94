//! [`ProtobufSerializer`]: Protobuf messages (prost) in the schema
//! registry wire format, with their message indexes (the `protobuf`
//! feature).

use std::marker::PhantomData;

use bytes::Bytes;

use super::registry::{SchemaRegistry, SchemaType};
use super::serializer::{SerializeError, Serializer, Side};
use super::wire;

/// Messages of type `M` (a `prost::Message`) framed for the schema
/// registry as Confluent's `KafkaProtobufSerializer` writes them: magic
/// byte 0, the schema id, the message indexes of `M`'s type in the
/// schema, then the message.
///
/// The schema is the `.proto` file's text (the registry stores the text;
/// prost keeps none at run time) and the message's full name
/// (`package.Message`, or `package.Outer.Inner`); its message indexes
/// are found in the text. Imports (schema references) are not
/// registered: the file must stand alone.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use courier_kafka::typed::{ProtobufSerializer, Raw, SchemaRegistry, TypedProducer};
/// #[derive(Clone, PartialEq, prost::Message)]
/// struct Order {
///     #[prost(int64, tag = "1")]
///     id: i64,
/// }
/// let proto = "syntax = \"proto3\"; package shop; message Order { int64 id = 1; }";
/// let registry = SchemaRegistry::new("http://localhost:8081")?;
/// let ser = ProtobufSerializer::<Order>::new(registry, proto, "shop.Order")?;
/// let producer = courier_kafka::Producer::builder().bootstrap("localhost:9092").build()?;
/// let orders: TypedProducer<str, Order, _, _> = TypedProducer::new(producer, Raw, ser);
/// orders.send("orders", Some("customer-7"), Some(&Order { id: 7 })).await?;
/// # Ok(()) }
/// ```
pub struct ProtobufSerializer<M> {
    registry: SchemaRegistry,
    text: String,
    full_name: String,
    indexes: Vec<i32>,
    types: PhantomData<fn(&M)>,
}

impl<M> Clone for ProtobufSerializer<M> {
    fn clone(&self) -> Self {
        ProtobufSerializer {
            registry: self.registry.clone(),
            text: self.text.clone(),
            full_name: self.full_name.clone(),
            indexes: self.indexes.clone(),
            types: PhantomData,
        }
    }
}

impl<M> std::fmt::Debug for ProtobufSerializer<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtobufSerializer")
            .field("message", &self.full_name)
            .field("indexes", &self.indexes)
            .finish_non_exhaustive()
    }
}

impl<M> ProtobufSerializer<M> {
    /// A serializer of `message` (its full name) of the `.proto` text
    /// `schema`; an error when the text declares no such message.
    pub fn new(
        registry: SchemaRegistry,
        schema: &str,
        message: &str,
    ) -> Result<Self, SerializeError> {
        let indexes = message_indexes(schema, message).ok_or_else(|| {
            SerializeError::encode(
                "(none)",
                Side::Value,
                format!("the .proto text declares no message {message:?} (give its full name, package included)"),
            )
        })?;
        Ok(ProtobufSerializer {
            registry,
            text: schema.to_string(),
            full_name: message.trim_start_matches('.').to_string(),
            indexes,
            types: PhantomData,
        })
    }

    /// The message indexes written before each message.
    pub fn message_indexes(&self) -> &[i32] {
        &self.indexes
    }
}

impl<M: prost::Message + Sync> Serializer<M> for ProtobufSerializer<M> {
    async fn serialize(&self, topic: &str, side: Side, value: &M) -> Result<Bytes, SerializeError> {
        // The record name strategies always have a name here.
        let subject = self
            .registry
            .subject(topic, side, Some(&self.full_name))
            .unwrap_or_default();
        let registered = self
            .registry
            .resolve(&subject, SchemaType::Protobuf, &self.text)
            .await
            .map_err(|error| SerializeError::Registry {
                topic: topic.to_string(),
                side,
                error,
            })?;
        let mut out = Vec::with_capacity(8 + value.encoded_len());
        wire::write_header(&mut out, registered.id);
        wire::write_message_indexes(&mut out, &self.indexes);
        value
            .encode(&mut out)
            .map_err(|e| SerializeError::encode(topic, side, e))?;
        Ok(Bytes::from(out))
    }
}

/// The message indexes of `full_name` in the `.proto` text: the position
/// of each message, among the messages declared beside it, from the top
/// level down. `None` when it is not declared.
pub(crate) fn message_indexes(proto: &str, full_name: &str) -> Option<Vec<i32>> {
    let tokens = tokenize(proto);
    let mut package = String::new();
    // Each open brace: the message it opens (its index path and names;
    // empty for another block: an enum, a service, an option's value),
    // and how many messages have been declared inside it so far.
    struct Scope {
        path: Vec<i32>,
        names: Vec<String>,
        children: i32,
    }
    let mut stack = vec![Scope {
        path: vec![],
        names: vec![],
        children: 0,
    }];
    let want = full_name.trim_start_matches('.');
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "package" if stack.len() == 1 => {
                package = tokens.get(i + 1).cloned().unwrap_or_default();
                i += 2;
                continue;
            }
            "message" if tokens.get(i + 2).map(String::as_str) == Some("{") => {
                let name = tokens[i + 1].clone();
                let parent = stack.last_mut()?;
                let mut path = parent.path.clone();
                path.push(parent.children);
                parent.children += 1;
                let mut names = parent.names.clone();
                names.push(name);
                let full = if package.is_empty() {
                    names.join(".")
                } else {
                    format!("{package}.{}", names.join("."))
                };
                if full == want {
                    return Some(path);
                }
                stack.push(Scope {
                    path,
                    names,
                    children: 0,
                });
                i += 3;
                continue;
            }
            "{" => stack.push(Scope {
                path: vec![],
                names: vec![],
                children: 0,
            }),
            "}" if stack.len() > 1 => {
                stack.pop();
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The text's words and its `{ } ; =` marks, comments and string literals
/// left out.
fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    let flush = |word: &mut String, tokens: &mut Vec<String>| {
        if !word.is_empty() {
            tokens.push(std::mem::take(word));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                flush(&mut word, &mut tokens);
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                flush(&mut word, &mut tokens);
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' | '\'' => {
                flush(&mut word, &mut tokens);
                let mut escaped = false;
                for d in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == c {
                        break;
                    }
                }
                tokens.push("\"\"".into());
            }
            '{' | '}' | ';' | '=' | '(' | ')' | '[' | ']' | '<' | '>' | ',' => {
                flush(&mut word, &mut tokens);
                tokens.push(c.to_string());
            }
            c if c.is_whitespace() => flush(&mut word, &mut tokens),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut tokens);
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROTO: &str = r#"
        syntax = "proto3";
        package shop.v1;
        import "google/protobuf/timestamp.proto";
        option java_package = "com.shop { not a brace }";
        // message Commented { }
        /* message Blocked { } */
        message Order {
            int64 id = 1;
            message Line { string sku = 1; }
            enum State { NEW = 0; }
            message Note { string text = 1; message Deep {} }
            oneof pay { string card = 2; string cash = 3; }
            Line line = 4 [deprecated = true];
        }
        enum Top { A = 0; }
        service Shop { rpc Buy (Order) returns (Order) { option (x) = { a: 1 }; } }
        message Customer { string name = 1; }
    "#;

    #[test]
    fn message_indexes_are_found_in_the_text() {
        let ix = |name| message_indexes(PROTO, name);
        assert_eq!(ix("shop.v1.Order"), Some(vec![0]));
        assert_eq!(ix("shop.v1.Order.Line"), Some(vec![0, 0]));
        assert_eq!(ix("shop.v1.Order.Note"), Some(vec![0, 1]));
        assert_eq!(ix("shop.v1.Order.Note.Deep"), Some(vec![0, 1, 0]));
        assert_eq!(ix(".shop.v1.Customer"), Some(vec![1]));
        assert_eq!(ix("Customer"), None, "the package is part of the name");
        assert_eq!(ix("shop.v1.Commented"), None);
        assert_eq!(ix("shop.v1.Blocked"), None);
        assert_eq!(
            message_indexes("message A {} message B {}", "B"),
            Some(vec![1])
        );
    }
}
