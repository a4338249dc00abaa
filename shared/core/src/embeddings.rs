//! What makes vectors, in the worker (passages) and the API (questions): the
//! static model that ships with the service (potion-base-8M, `svc_embed`),
//! or an OpenAI-compatible `/v1/embeddings` endpoint (`SVC_EMBEDDINGS_BASE_URL`).
//!
//! Both binaries read the same settings ([`EmbeddingsArgs`]) and load the
//! model at start: a missing or corrupt model file stops them there, with a
//! message that names the file and `scripts/fetch-model`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use svc_embed::{Quantized, StaticModel};

use crate::openai::{Endpoint, EndpointConfig};

/// Where the model folder is by default: where `scripts/fetch-model` puts it.
pub const DEFAULT_MODEL_DIR: &str = "models/potion-base-8M";

/// Texts embedded in place rather than on the blocking pool: a question.
const IN_PLACE: usize = 4;

/// Retrieval by meaning: on (the embedded model, or the endpoint when
/// `SVC_EMBEDDINGS_BASE_URL` is set) or off (answers by words alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// The embeddings settings both binaries share.
#[derive(Clone, Debug, clap::Args)]
pub struct EmbeddingsArgs {
    /// Retrieval by meaning beside BM25F.
    #[arg(long = "embeddings", env = "SVC_EMBEDDINGS", value_enum, default_value_t = Switch::On)]
    pub switch: Switch,

    /// The static model's folder (model.safetensors and tokenizer.json, as
    /// scripts/fetch-model leaves them).
    #[arg(long, env = "SVC_EMBEDDINGS_MODEL_DIR", default_value = DEFAULT_MODEL_DIR)]
    pub embeddings_model_dir: PathBuf,

    /// An OpenAI-compatible embeddings endpoint (up to /v1) instead of the static model.
    #[arg(long, env = "SVC_EMBEDDINGS_BASE_URL")]
    pub embeddings_base_url: Option<String>,

    /// The endpoint's model name (required with SVC_EMBEDDINGS_BASE_URL).
    #[arg(long, env = "SVC_EMBEDDINGS_MODEL")]
    pub embeddings_model: Option<String>,

    /// The endpoint's API key, sent as a bearer token.
    #[arg(long, env = "SVC_EMBEDDINGS_API_KEY", hide_env_values = true)]
    pub embeddings_api_key: Option<SecretString>,

    /// Longest wait for one call of the endpoint.
    #[arg(long, env = "SVC_EMBEDDINGS_TIMEOUT_SECS", default_value_t = 30)]
    pub embeddings_timeout_secs: u64,

    /// The endpoint model's cosine below which a passage is not close in
    /// meaning to a question (each model has its own scale).
    #[arg(long, env = "SVC_EMBEDDINGS_MIN_SIMILARITY", default_value_t = 0.3)]
    pub embeddings_min_similarity: f32,
}

impl Default for EmbeddingsArgs {
    /// The flags' defaults with no environment (for tests and the benchmark).
    fn default() -> Self {
        Self {
            switch: Switch::On,
            embeddings_model_dir: PathBuf::from(DEFAULT_MODEL_DIR),
            embeddings_base_url: None,
            embeddings_model: None,
            embeddings_api_key: None,
            embeddings_timeout_secs: 30,
            embeddings_min_similarity: 0.3,
        }
    }
}

impl EmbeddingsArgs {
    /// What questions are embedded with: [`load`](Self::load)'s model and,
    /// beside an endpoint, the static model if its files are there.
    pub fn load_for_questions(&self) -> Result<Option<Models>, String> {
        let Some(configured) = self.load()? else { return Ok(None) };
        let mut models = vec![configured];
        if self.embeddings_base_url.is_some() {
            match Embeddings::load(&self.embeddings_model_dir) {
                Ok(fallback) => models.push(Arc::new(fallback)),
                Err(error) => tracing::info!(%error, "no static model beside the endpoint's"),
            }
        }
        Ok(Some(Models(models)))
    }

    /// The model these settings name, loaded and checked; `None` when off.
    pub fn load(&self) -> Result<Option<Arc<Embeddings>>, String> {
        if self.switch == Switch::Off {
            return Ok(None);
        }
        let embeddings = match &self.embeddings_base_url {
            Some(base_url) => {
                let model = self
                    .embeddings_model
                    .clone()
                    .ok_or("SVC_EMBEDDINGS_MODEL is required with SVC_EMBEDDINGS_BASE_URL")?;
                Embeddings::remote(
                    EndpointConfig {
                        base_url: base_url.clone(),
                        model,
                        api_key: self.embeddings_api_key.as_ref().map(|k| k.expose_secret().to_owned()),
                        timeout: Duration::from_secs(self.embeddings_timeout_secs.max(1)),
                    },
                    self.embeddings_min_similarity,
                )?
            }
            None => Embeddings::load(&self.embeddings_model_dir).map_err(|e| format!("the embedding model: {e}"))?,
        };
        tracing::info!(model = embeddings.id(), "retrieval by meaning");
        Ok(Some(Arc::new(embeddings)))
    }
}

/// The cosine of the static model below which nothing is close in meaning
/// (measured on the paraphrase set, docs/decisions.md "Fusing words and
/// meaning": 97% of its questions have a passage above it, 7% of questions
/// about other things do).
pub const STATIC_MIN_SIMILARITY: f32 = 0.28;

/// A model that turns texts into vectors.
pub struct Embeddings {
    maker: Maker,
    /// See [`svc_search::Asked::min_similarity`].
    min_similarity: f32,
}

enum Maker {
    Static(Arc<StaticModel>),
    Remote {
        endpoint: Box<Endpoint>,
        /// `remote:{model}`: what its vectors are stored as.
        id: String,
        /// Questions go by their words alone until then, after the endpoint
        /// failed one.
        resting: Resting,
    },
}

/// Longest wait for a question's vector: the question is searched by its
/// words without it.
const QUESTION_WAIT: Duration = Duration::from_secs(2);

/// The most dimensions a vector of an endpoint may have (the largest
/// embedding models' have 4,096; a block stores the dimension in 16 bits).
const MAX_DIMENSIONS: usize = 4096;

// A batch of vectors of the most dimensions fits one reply, at up to 64 bytes
// a number.
const _: () = assert!(crate::openai::MAX_REPLY >= svc_search::EMBED_BATCH * MAX_DIMENSIONS * 64);

/// How long questions skip an endpoint that failed one: while it is down,
/// answers go by words at once instead of each waiting for it.
const REST: Duration = Duration::from_secs(10);

/// When an endpoint that failed a question may be asked again.
struct Resting {
    since: std::time::Instant,
    /// Milliseconds after `since`; 0: not resting.
    until: std::sync::atomic::AtomicU64,
}

impl Resting {
    fn new() -> Self {
        Self { since: std::time::Instant::now(), until: std::sync::atomic::AtomicU64::new(0) }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn is_resting(&self) -> bool {
        self.now() < self.until.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn rest(&self) {
        let until = self.now().saturating_add(u64::try_from(REST.as_millis()).unwrap_or(u64::MAX));
        self.until.store(until, std::sync::atomic::Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Embeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Embeddings").field(&self.id()).finish()
    }
}

impl Embeddings {
    /// The static model of `dir`, checked against its pinned digests.
    pub fn load(dir: &std::path::Path) -> Result<Self, svc_embed::LoadError> {
        let maker = Maker::Static(Arc::new(StaticModel::load(dir)?));
        Ok(Self { maker, min_similarity: STATIC_MIN_SIMILARITY })
    }

    /// The model behind an OpenAI-compatible endpoint, whose passages count
    /// as close in meaning to a question from cosine `min_similarity`.
    pub fn remote(config: EndpointConfig, min_similarity: f32) -> Result<Self, String> {
        let id = format!("remote:{}", config.model);
        Ok(Self {
            maker: Maker::Remote { endpoint: Box::new(Endpoint::new(config)?), id, resting: Resting::new() },
            min_similarity,
        })
    }

    /// The model's name as stored beside its vectors: another name is
    /// another model, whose vectors are not compared with these.
    pub fn id(&self) -> &str {
        match &self.maker {
            Maker::Static(model) => model.id(),
            Maker::Remote { id, .. } => id,
        }
    }

    /// Whether this is the static model, in the process.
    pub fn is_local(&self) -> bool {
        matches!(self.maker, Maker::Static(_))
    }

    /// A question's vector, or `None` (then it is searched by its words): an
    /// endpoint gets one try of at most [`QUESTION_WAIT`], and after a
    /// failure is left alone for [`REST`].
    pub async fn question(&self, question: &str) -> Option<Quantized> {
        let texts = [question.to_owned()];
        let vectors = match &self.maker {
            Maker::Static(model) => Ok(vec![model.embed(question)]),
            Maker::Remote { resting, .. } if resting.is_resting() => return None,
            Maker::Remote { endpoint, resting, .. } => {
                let body = json!({ "model": endpoint.model(), "input": texts });
                let asked =
                    endpoint.post_once("embeddings", &body, |reply| read_vectors(reply, 1), QUESTION_WAIT).await;
                // Only an endpoint that cannot serve anyone is left alone:
                // one question it refuses says nothing of the next.
                asked.map_err(|failed| {
                    if failed.of_the_endpoint() {
                        resting.rest();
                    }
                })
            }
        };
        vectors.ok()?.first().map(|v| svc_embed::quantize(v))
    }

    /// The vectors of `texts`, in order, each of length 1 (or zero).
    pub async fn vectors(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        match &self.maker {
            Maker::Static(model) if texts.len() <= IN_PLACE => Ok(texts.iter().map(|t| model.embed(t)).collect()),
            Maker::Static(model) => {
                // A revision's passages: milliseconds of CPU, off the runtime's threads.
                let (model, texts) = (model.clone(), texts.to_vec());
                tokio::task::spawn_blocking(move || texts.iter().map(|t| model.embed(t)).collect())
                    .await
                    .map_err(|e| format!("embedding stopped: {e}"))
            }
            Maker::Remote { endpoint, .. } => {
                let body = json!({ "model": endpoint.model(), "input": texts });
                endpoint.post("embeddings", &body, |reply| read_vectors(reply, texts.len())).await
            }
        }
    }
}

/// `data[i].embedding` in order of `data[i].index`, one per text, scaled to
/// length 1 (some servers do not normalise).
fn read_vectors(reply: Value, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = reply.get("data").and_then(Value::as_array).ok_or("no data array")?;
    if data.len() != expected {
        return Err(format!("{} embeddings for {expected} inputs", data.len()));
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = item.get("index").and_then(Value::as_u64).map_or(position, |i| i as usize);
        let values = item.get("embedding").and_then(Value::as_array).ok_or("an item without an embedding array")?;
        if values.len() > MAX_DIMENSIONS {
            return Err(format!("an embedding of {} dimensions (at most {MAX_DIMENSIONS})", values.len()));
        }
        let mut vector: Vec<f32> = values
            .iter()
            .map(|v| v.as_f64().map(|x| x as f32).filter(|x| x.is_finite()))
            .collect::<Option<_>>()
            .ok_or("a non-number in an embedding")?;
        let norm = vector.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|x| *x = (f64::from(*x) / norm) as f32);
        }
        let slot = vectors.get_mut(index).ok_or_else(|| format!("index {index} out of range"))?;
        *slot = Some(vector);
    }
    let vectors: Vec<Vec<f32>> = vectors.into_iter().collect::<Option<_>>().ok_or("an index given twice")?;
    let dim = vectors.first().map_or(0, Vec::len);
    if dim == 0 || vectors.iter().any(|v| v.len() != dim) {
        return Err("embeddings of no or of different dimensions".into());
    }
    Ok(vectors)
}

impl svc_search::Embedder for Embeddings {
    fn model(&self) -> &str {
        self.id()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        self.vectors(texts).await
    }
}

/// The models an API process embeds questions with: the configured one
/// first, and the static model beside an endpoint's when its files are there,
/// so that Agents still on the static model's vectors during a change of
/// model answer by meaning until the workers switch them over.
#[derive(Debug)]
pub struct Models(pub Vec<Arc<Embeddings>>);

impl Models {
    /// The configured model.
    pub fn primary(&self) -> Option<&Arc<Embeddings>> {
        self.0.first()
    }

    /// The static model, if this process has it: what scores the sentences
    /// of an answer (no call leaves the process for that).
    pub fn local(&self) -> Option<&Arc<Embeddings>> {
        self.0.iter().find(|m| m.is_local())
    }

    fn of(&self, model: &str) -> Option<&Arc<Embeddings>> {
        self.0.iter().find(|m| m.id() == model)
    }

    /// `question` embedded by `model`, if this process has it; `None` also
    /// when the endpoint could not embed it (logged), and the question is
    /// searched by its words.
    pub async fn ask(&self, model: String, question: &str) -> Option<svc_search::Asked> {
        let embeddings = self.of(&model)?;
        let vector = embeddings.question(question).await?;
        Some(svc_search::Asked { model, vector, min_similarity: embeddings.min_similarity })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoints_reply_is_read_in_index_order_and_normalised() {
        let reply = json!({"data": [
            {"index": 1, "embedding": [0.0, 2.0]},
            {"index": 0, "embedding": [3.0, 4.0]},
        ]});
        let vectors = read_vectors(reply, 2).unwrap();
        assert_eq!(vectors, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
        let largest = read_vectors(json!({"data": [{"embedding": vec![1.0; MAX_DIMENSIONS]}]}), 1).unwrap();
        assert_eq!(largest[0].len(), MAX_DIMENSIONS);
        let huge = read_vectors(json!({"data": [{"embedding": [3e38, 3e38]}]}), 1).unwrap();
        assert!(huge[0].iter().all(|x| (x - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6), "{huge:?}");
    }

    #[test]
    fn a_reply_that_does_not_fit_is_refused() {
        for (reply, expected) in [
            (json!({"data": [{"index": 0, "embedding": [1.0]}]}), 2),
            (json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}), 2),
            (json!({"data": [{"index": 5, "embedding": [1.0]}]}), 1),
            (json!({"data": [{"embedding": [1.0]}, {"embedding": [1.0, 2.0]}]}), 2),
            (json!({"data": [{"embedding": ["x"]}]}), 1),
            (json!({"data": [{"embedding": []}]}), 1),
            (json!({"object": "list"}), 1),
            (json!({"data": [{"embedding": vec![0.5; MAX_DIMENSIONS + 1]}]}), 1),
            (json!({"data": [{"embedding": [1e300, 1.0]}]}), 1),
        ] {
            assert!(read_vectors(reply.clone(), expected).is_err(), "{reply}");
        }
    }
}
