//! The one HTTP client set-up of the domain's outbound calls (the answer
//! model, the embeddings endpoint, the identity provider's discovery, keys
//! and token endpoint): HTTP/1.1 over rustls with the system's roots, plain
//! HTTP allowed (a model server on the same host).

use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// A client whose requests carry bodies of type `B`.
pub type HttpsClient<B> = Client<hyper_rustls::HttpsConnector<HttpConnector>, B>;

/// A new client, or why the system's TLS roots could not be read.
pub fn client<B>() -> Result<HttpsClient<B>, String>
where
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
{
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| format!("no TLS root certificates: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}
