//! A request other than Produce (Metadata, InitProducerId, a transaction's) waiting for
//! its response, and how its response is decoded and handed over.

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse,
};
use tokio::sync::oneshot;

use crate::protocol::message::decode_response;

/// Hands a response frame (or why none came) to whoever asked, decoding
/// it; `Err` when the frame could not be decoded.
pub(super) type Answer = Box<dyn FnOnce(Result<bytes::Bytes, String>) -> Result<(), String> + Send>;

/// A request other than Produce, waiting for its response.
pub(super) enum Call {
    Metadata(i16, oneshot::Sender<Result<MetadataResponse, String>>),
    InitProducerId(i16, oneshot::Sender<Result<InitProducerIdResponse, String>>),
    /// Any other request (`Ask`).
    Any(Answer),
}

impl Call {
    pub(super) fn fail(self, error: String) {
        match self {
            Call::Metadata(_, tx) => {
                let _ = tx.send(Err(error));
            }
            Call::InitProducerId(_, tx) => {
                let _ = tx.send(Err(error));
            }
            Call::Any(answer) => {
                let _ = answer(Err(error));
            }
        }
    }

    /// Decodes the response and hands it over; a decode error is returned
    /// too, since the connection can no longer be trusted.
    pub(super) fn answer(self, frame: bytes::Bytes) -> Result<(), String> {
        fn send<T>(
            tx: oneshot::Sender<Result<T, String>>,
            r: Result<T, String>,
        ) -> Result<(), String> {
            let failed = r.as_ref().err().cloned();
            let _ = tx.send(r);
            failed.map_or(Ok(()), Err)
        }
        match self {
            Call::Metadata(v, tx) => send(
                tx,
                decode_response::<MetadataRequest>(frame, v)
                    .map(|(_, r)| r)
                    .map_err(|e| e.to_string()),
            ),
            Call::InitProducerId(v, tx) => send(
                tx,
                decode_response::<InitProducerIdRequest>(frame, v)
                    .map(|(_, r)| r)
                    .map_err(|e| e.to_string()),
            ),
            Call::Any(answer) => answer(Ok(frame)),
        }
    }
}
