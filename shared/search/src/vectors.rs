//! The vector store: every passage's vector, kept as the postings are, and
//! searched exactly.
//!
//! A fresh document's vectors are one row (`knowledge_document_vectors`); a
//! merge gathers its segment's documents' vectors into one row of the
//! segment (`knowledge_segment_vectors`), leaving masked documents out, in
//! the merge's transaction. Each row names the model that made its vectors
//! (an Agent answers with one model at a time: [`crate::models`]).
//!
//! A row never changes once written (a merge writes new segments, a model
//! change new rows), so an API process keeps the rows it read by key
//! ([`Cache`]): a question reads the keys of the Agent's segments and fresh
//! documents and its masks (three small reads), fetches only the rows it
//! does not keep, and scans every vector. The scan is exact: int8 dot
//! products (`svc_embed::dot`, SIMD), a few milliseconds at 100,000 passages.
//!
//! This module is the whole vector store: what writes, merges and searches
//! vectors goes through it, so a store of another kind (pgvector's HNSW
//! index, where PostgreSQL offers it) would replace it without touching the
//! index's callers.

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use svc_embed::Quantized;

use crate::error::{Error, Result};

/// The layout version a block is written in.
const LAYOUT: u8 = 1;

/// The vectors of some documents' passages, as one row stores them: for each
/// document (by number, ascending), its passages' vectors in ordinal order.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    dim: usize,
    /// (document number, index of its first vector, its passages).
    documents: Vec<(i64, u32, u32)>,
    /// One per vector.
    scales: Vec<f32>,
    /// `dim` per vector.
    values: Vec<i8>,
}

impl Block {
    /// Gathers `documents`' vectors (number, passages' vectors in ordinal
    /// order) into one block; they must share one dimension.
    pub fn of(dim: usize, documents: &[(i64, &[Quantized])]) -> Result<Block> {
        let mut block = Block { dim, documents: Vec::new(), scales: Vec::new(), values: Vec::new() };
        let mut sorted: Vec<&(i64, &[Quantized])> = documents.iter().collect();
        sorted.sort_by_key(|(number, _)| *number);
        for (number, vectors) in sorted {
            block.push(*number, vectors.iter().map(|v| (v.scale, v.values.as_slice())))?;
        }
        Ok(block)
    }

    /// One document's vectors, as its own row stores them: the row names the
    /// document, so the block holds it as number 0 ([`renumbered`](Self::renumbered)
    /// on reading).
    pub fn single(vectors: &[Quantized]) -> Block {
        let dim = vectors.first().map_or(0, |v| v.values.len());
        let mut block = Block { dim, documents: Vec::new(), scales: Vec::new(), values: Vec::new() };
        // Every vector of one model has its dimension: nothing to refuse.
        let kept = vectors.iter().filter(|v| v.values.len() == dim).map(|v| (v.scale, v.values.as_slice()));
        let _ = block.push(0, kept);
        block
    }

    /// A one-document block read from its document's row, as document `number`.
    pub fn renumbered(mut self, number: i64) -> Block {
        if let [only] = self.documents.as_mut_slice() {
            only.0 = number;
        }
        self
    }

    /// The documents whose vectors the block holds.
    pub fn numbers(&self) -> impl Iterator<Item = i64> + '_ {
        self.documents.iter().map(|d| d.0)
    }

    /// Appends a document's vectors (its number larger than any held).
    fn push<'a>(&mut self, number: i64, vectors: impl Iterator<Item = (f32, &'a [i8])>) -> Result<()> {
        let first = u32::try_from(self.scales.len()).map_err(|_| corrupt("too many vectors in one block"))?;
        let mut count = 0u32;
        for (scale, values) in vectors {
            if values.len() != self.dim {
                return Err(corrupt(format!("a vector of {} dimensions in a block of {}", values.len(), self.dim)));
            }
            self.scales.push(scale);
            self.values.extend_from_slice(values);
            count += 1;
        }
        self.documents.push((number, first, count));
        Ok(())
    }

    /// The documents held, with their vectors, except those of `dropped`:
    /// what a merge carries into its new segment.
    pub fn merged<'a>(blocks: impl Iterator<Item = &'a Block>, dropped: &HashSet<i64>) -> Result<Option<Block>> {
        let mut parts: Vec<(i64, &Block, u32, u32)> = Vec::new();
        let (mut dim, mut any) = (None, false);
        for block in blocks {
            // A block without vectors (documents with no passages left, as a
            // retired one has) has no dimension to agree on.
            if !block.scales.is_empty() && *dim.get_or_insert(block.dim) != block.dim {
                return Err(corrupt("blocks of different dimensions merged"));
            }
            any = true;
            parts.extend(block.documents.iter().filter(|d| !dropped.contains(&d.0)).map(|d| (d.0, block, d.1, d.2)));
        }
        if !any {
            return Ok(None);
        }
        let dim = dim.unwrap_or(0);
        parts.sort_by_key(|p| p.0);
        let mut merged = Block { dim, documents: Vec::new(), scales: Vec::new(), values: Vec::new() };
        for (number, block, first, count) in parts {
            let range = first as usize..(first + count) as usize;
            let vectors = range.map(|i| (block.scales[i], &block.values[i * dim..(i + 1) * dim]));
            merged.push(number, vectors)?;
        }
        Ok(Some(merged))
    }

    /// Layout 1, little-endian: the layout byte, the dimension (u16), the
    /// documents (u32), then each document's number (i64) and passages
    /// (u32), then every vector's scale (f32), then every vector's values (i8).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(7 + self.documents.len() * 12 + self.scales.len() * 4 + self.values.len());
        out.push(LAYOUT);
        out.extend_from_slice(&u16::try_from(self.dim).unwrap_or(u16::MAX).to_le_bytes());
        out.extend_from_slice(&u32::try_from(self.documents.len()).unwrap_or(u32::MAX).to_le_bytes());
        for (number, _, count) in &self.documents {
            out.extend_from_slice(&number.to_le_bytes());
            out.extend_from_slice(&count.to_le_bytes());
        }
        for scale in &self.scales {
            out.extend_from_slice(&scale.to_le_bytes());
        }
        out.extend(self.values.iter().map(|v| v.to_le_bytes()[0]));
        out
    }

    /// Reads what [`to_bytes`](Self::to_bytes) wrote.
    pub fn from_bytes(bytes: &[u8]) -> Result<Block> {
        let mut reader = Reader(bytes);
        if reader.take::<1>()? != [LAYOUT] {
            return Err(corrupt("a vector block of an unknown layout"));
        }
        let dim = usize::from(u16::from_le_bytes(reader.take()?));
        let n = u32::from_le_bytes(reader.take()?) as usize;
        // Sized by what the bytes can hold, not by what a header claims.
        let mut documents = Vec::with_capacity(n.min(bytes.len() / 12));
        let mut vectors = 0u32;
        for _ in 0..n {
            let number = i64::from_le_bytes(reader.take()?);
            let count = u32::from_le_bytes(reader.take()?);
            documents.push((number, vectors, count));
            vectors = vectors.checked_add(count).ok_or_else(|| corrupt("a vector block too large"))?;
        }
        let vectors = vectors as usize;
        let mut scales = Vec::with_capacity(vectors.min(reader.0.len() / 4));
        for _ in 0..vectors {
            scales.push(f32::from_le_bytes(reader.take()?));
        }
        if reader.0.len() != vectors * dim {
            return Err(corrupt("a vector block of the wrong length"));
        }
        let values = reader.0.iter().map(|&b| i8::from_le_bytes([b])).collect();
        Ok(Block { dim, documents, scales, values })
    }

    /// What it holds in memory, in bytes.
    pub fn size(&self) -> usize {
        self.documents.len() * 16 + self.scales.len() * 4 + self.values.len()
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or_else(|| corrupt("a vector block cut short"))?;
        self.0 = rest;
        Ok(*head)
    }
}

fn corrupt(message: impl Into<String>) -> Error {
    Error::Corrupt(message.into())
}

/// A passage a vector search found: (document, ordinal) and its cosine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Near {
    pub document: i64,
    pub ordinal: i32,
    pub score: f32,
}

/// What one scan found: the best `k` passages, and the scores of the
/// `wanted` passages (the other side's candidates), all outside masked
/// documents.
#[derive(Debug, Default)]
pub struct Scanned {
    pub best: Vec<Near>,
    pub wanted: HashMap<(i64, i32), f32>,
}

/// Scans every vector of `blocks` against `query`: exact cosines.
pub fn scan(
    blocks: &[Arc<Block>],
    query: &Quantized,
    masked: &HashSet<i64>,
    wanted: &HashSet<(i64, i32)>,
    k: usize,
) -> Scanned {
    let wanted_documents: HashSet<i64> = wanted.iter().map(|w| w.0).collect();
    /// Ordered by score, worst first, for a min-heap of the best.
    #[derive(PartialEq)]
    struct Worst(Near);
    impl Eq for Worst {}
    impl PartialOrd for Worst {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Worst {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            other
                .0
                .score
                .total_cmp(&self.0.score)
                .then((other.0.document, other.0.ordinal).cmp(&(self.0.document, self.0.ordinal)))
        }
    }
    let mut heap: BinaryHeap<Worst> = BinaryHeap::with_capacity(k + 1);
    let mut scanned = Scanned::default();
    for block in blocks {
        if block.dim != query.values.len() {
            continue;
        }
        let dim = block.dim;
        for &(document, first, count) in &block.documents {
            if masked.contains(&document) {
                continue;
            }
            // The other side's candidates are a few passages: a document
            // holding none is passed over with one look-up.
            let keep = wanted_documents.contains(&document);
            for i in 0..count {
                let at = (first + i) as usize;
                let values = &block.values[at * dim..(at + 1) * dim];
                let score = svc_embed::dot(&query.values, values) as f32 * query.scale * block.scales[at];
                let near = Near { document, ordinal: i as i32, score };
                if keep && wanted.contains(&(document, near.ordinal)) {
                    scanned.wanted.insert((document, near.ordinal), score);
                }
                if heap.len() < k {
                    heap.push(Worst(near));
                } else if heap.peek().is_some_and(|worst| score > worst.0.score) {
                    heap.pop();
                    heap.push(Worst(near));
                }
            }
        }
    }
    scanned.best = heap.into_sorted_vec().into_iter().map(|w| w.0).collect();
    scanned
}

/// The blocks of `model` of an Agent's `layout` (its segments and fresh
/// documents), from `cache` where kept, else read (and kept). Segments or
/// documents with no block of the model (not embedded with it yet) have none.
pub async fn load(
    conn: &mut sqlx::PgConnection,
    cache: &Cache,
    model: &str,
    layout: &crate::store::vectors::Layout,
) -> Result<Vec<Arc<Block>>> {
    let mut blocks = Vec::with_capacity(layout.segments.len() + layout.documents.len());
    let (mut segments, mut documents) = (Vec::new(), Vec::new());
    for &id in &layout.segments {
        match cache.get(&Key::Segment(id), model) {
            Some(block) => blocks.push(block),
            None => segments.push(id),
        }
    }
    for &number in &layout.documents {
        match cache.get(&Key::Document(number), model) {
            Some(block) => blocks.push(block),
            None => documents.push(number),
        }
    }
    if segments.is_empty() && documents.is_empty() {
        return Ok(blocks);
    }
    for (segment, key, bytes) in crate::store::vectors::blocks(conn, model, &segments, &documents).await? {
        let block = Block::from_bytes(&bytes)?;
        let (key, block) =
            if segment { (Key::Segment(key), block) } else { (Key::Document(key), block.renumbered(key)) };
        let block = Arc::new(block);
        cache.put(key, model, block.clone());
        blocks.push(block);
    }
    Ok(blocks)
}

/// Where a block is stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    Segment(i64),
    Document(i64),
}

/// The blocks an API process keeps, by key and model, up to a number of
/// bytes: the least recently used go first. Stored blocks never change, so
/// what is kept is never stale.
pub struct Cache {
    max_bytes: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    blocks: HashMap<(Key, String), (Arc<Block>, u64)>,
    bytes: usize,
    clock: u64,
    hits: u64,
    misses: u64,
}

/// What a [`Cache`] holds and how it served, for the metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheFigures {
    pub bytes: usize,
    pub max_bytes: usize,
    pub blocks: usize,
    pub hits: u64,
    pub misses: u64,
}

impl Cache {
    /// A cache of at most `max_bytes` (0: nothing kept; every question reads
    /// its vectors from PostgreSQL).
    pub fn new(max_bytes: usize) -> Self {
        Self { max_bytes, state: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding it leaves a consistent map: go on with it.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The block kept under `key` for `model`, counted as a hit or a miss.
    pub fn get(&self, key: &Key, model: &str) -> Option<Arc<Block>> {
        let mut state = self.lock();
        state.clock += 1;
        let clock = state.clock;
        let found = state.blocks.get_mut(&(key.clone(), model.to_owned())).map(|(block, used)| {
            *used = clock;
            block.clone()
        });
        if found.is_some() {
            state.hits += 1;
        } else {
            state.misses += 1;
        }
        found
    }

    /// Keeps `block`, making room by dropping the least recently used.
    pub fn put(&self, key: Key, model: &str, block: Arc<Block>) {
        let size = block.size();
        if size > self.max_bytes {
            return;
        }
        let mut state = self.lock();
        state.clock += 1;
        let clock = state.clock;
        while state.bytes + size > self.max_bytes {
            let Some(oldest) = state.blocks.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone()) else {
                break;
            };
            if let Some((gone, _)) = state.blocks.remove(&oldest) {
                state.bytes -= gone.size();
            }
        }
        if let Some((old, _)) = state.blocks.insert((key, model.to_owned()), (block, clock)) {
            state.bytes -= old.size();
        }
        state.bytes += size;
    }

    pub fn figures(&self) -> CacheFigures {
        let state = self.lock();
        CacheFigures {
            bytes: state.bytes,
            max_bytes: self.max_bytes,
            blocks: state.blocks.len(),
            hits: state.hits,
            misses: state.misses,
        }
    }
}

#[cfg(test)]
mod tests {
    use svc_embed::quantize;

    use super::*;

    fn vector(x: &[f32]) -> Quantized {
        let norm = x.iter().map(|v| v * v).sum::<f32>().sqrt();
        quantize(&x.iter().map(|v| v / norm).collect::<Vec<_>>())
    }

    #[test]
    fn blocks_round_trip_and_refuse_what_they_did_not_write() {
        let a = [vector(&[1.0, 0.0, 0.0]), vector(&[0.0, 1.0, 0.0])];
        let b = [vector(&[0.0, 0.0, 1.0])];
        let block = Block::of(3, &[(9, &b), (4, &a)]).unwrap();
        assert_eq!(block.documents, [(4, 0, 2), (9, 2, 1)], "by number");
        let bytes = block.to_bytes();
        assert_eq!(Block::from_bytes(&bytes).unwrap(), block);
        assert!(Block::from_bytes(&bytes[..bytes.len() - 1]).is_err());
        assert!(Block::from_bytes(&[2, 3, 0]).is_err());
        assert!(Block::of(2, &[(1, &a)]).is_err(), "a vector of another dimension");
    }

    #[test]
    fn a_scan_finds_the_nearest_outside_masked_documents_and_scores_the_wanted() {
        let a = [vector(&[1.0, 0.0, 0.0]), vector(&[0.7, 0.7, 0.0])];
        let b = [vector(&[0.9, 0.1, 0.0])];
        let c = [vector(&[0.0, 0.0, 1.0])];
        let blocks =
            [Arc::new(Block::of(3, &[(1, &a), (2, &b)]).unwrap()), Arc::new(Block::of(3, &[(3, &c)]).unwrap())];
        let query = vector(&[1.0, 0.0, 0.0]);
        // Document 1's second passage is wanted, its first is not.
        let scanned = scan(&blocks, &query, &HashSet::new(), &HashSet::from([(3, 0), (1, 1)]), 2);
        let best: Vec<(i64, i32)> = scanned.best.iter().map(|n| (n.document, n.ordinal)).collect();
        assert_eq!(best, [(1, 0), (2, 0)]);
        assert!((scanned.best[0].score - 1.0).abs() < 0.02);
        assert_eq!(scanned.wanted.len(), 2);
        assert!(scanned.wanted[&(3, 0)].abs() < 0.02, "orthogonal");
        assert!((scanned.wanted[&(1, 1)] - 0.707).abs() < 0.02);
        let masked = scan(&blocks, &query, &HashSet::from([1]), &HashSet::new(), 2);
        assert_eq!(masked.best.iter().map(|n| n.document).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn a_merge_keeps_what_is_not_dropped_in_number_order() {
        let one = Block::of(2, &[(5, &[vector(&[1.0, 0.0])]), (7, &[vector(&[0.0, 1.0])])]).unwrap();
        let two = Block::of(2, &[(6, &[vector(&[1.0, 1.0]), vector(&[1.0, -1.0])])]).unwrap();
        let merged = Block::merged([&one, &two].into_iter(), &HashSet::from([7])).unwrap().unwrap();
        assert_eq!(merged.documents, [(5, 0, 1), (6, 1, 2)]);
        assert_eq!(merged.values.len(), 6);
        assert_eq!(Block::merged(std::iter::empty(), &HashSet::new()).unwrap(), None);
    }

    #[test]
    fn a_block_without_vectors_merges_with_any_dimension() {
        // A retired document embedded with no passages left: dimension 0.
        let retired = Block::single(&[]).renumbered(3);
        let held = Block::of(2, &[(5, &[vector(&[1.0, 0.0])])]).unwrap();
        let merged = Block::merged([&retired, &held].into_iter(), &HashSet::from([3])).unwrap().unwrap();
        assert_eq!((merged.dim, merged.documents.as_slice()), (2, &[(5, 0, 1)][..]));
        let only = Block::merged([&retired].into_iter(), &HashSet::new()).unwrap().unwrap();
        assert_eq!(only.documents, [(3, 0, 0)]);
        let other = Block::of(3, &[(6, &[vector(&[1.0, 0.0, 0.0])])]).unwrap();
        assert!(Block::merged([&held, &other].into_iter(), &HashSet::new()).is_err(), "two models' vectors");
    }

    #[test]
    fn a_header_claiming_more_than_its_bytes_is_refused_without_allocating_it() {
        let mut bytes = vec![LAYOUT, 2, 0];
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(Block::from_bytes(&bytes), Err(Error::Corrupt(_))));
    }

    #[test]
    fn the_cache_keeps_within_its_bytes_and_drops_the_least_recently_used() {
        let block = |n| Arc::new(Block::of(4, &[(n, &[vector(&[1.0, 0.0, 0.0, 0.0])])]).unwrap());
        let size = block(1).size();
        let cache = Cache::new(size * 2);
        cache.put(Key::Segment(1), "m", block(1));
        cache.put(Key::Segment(2), "m", block(2));
        assert!(cache.get(&Key::Segment(1), "m").is_some(), "1 used last");
        cache.put(Key::Segment(3), "m", block(3));
        assert!(cache.get(&Key::Segment(2), "m").is_none(), "2 went first");
        assert!(cache.get(&Key::Segment(1), "m").is_some());
        assert!(cache.get(&Key::Segment(1), "other").is_none(), "by model too");
        let figures = cache.figures();
        assert_eq!((figures.blocks, figures.bytes, figures.hits, figures.misses), (2, size * 2, 2, 2));
        assert!(figures.bytes <= figures.max_bytes);
        let none = Cache::new(0);
        none.put(Key::Document(1), "m", block(1));
        assert_eq!(none.figures().blocks, 0);
    }
}
