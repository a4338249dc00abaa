//! The background merge of an Agent's index (migration 0017).
//!
//! A promoted revision is a fresh document: its postings are its own
//! knowledge_terms rows, one per word. A merge moves fresh documents into a new
//! segment (one row per word, every posting of the segment in one array), with
//! it the older segments of the same language no larger than what it has
//! gathered so far once there are [`TIER`] - 1 of them (a base-4 counter: an
//! Agent keeps at most three segments of each size below the cap, and each
//! posting is rewritten about (3/4) log4(n / 256) times on average, where a
//! binary counter rewrote it (1/2) log2(n / 256) times), and drops the postings
//! and sizes of masked (retired) documents of whatever it rewrites, with their
//! masks.
//!
//! It runs after a promotion that leaves [`FRESH_LIMIT`] fresh documents or
//! [`MASK_LIMIT`] masks (and from the sweep, for Agents left so: [`maintain_due`]), one per Agent
//! at a time (a transaction-scoped advisory lock taken without waiting), in one
//! transaction: answers see the index before it or after it, never between.
//! It waits for no row lock: promotions only insert documents and words,
//! retirements only insert masks, and a mask committed while a merge runs is
//! simply kept with its document for the next one.

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::{Connection, PgConnection, PgPool};
use svc_ids::{AgentId, RevisionId};

use crate::Language;
use crate::error::{Error, Result};
use crate::postings::{self, Posting};
use crate::store::segments::{self as store, Backlog, Document, Segment};
use crate::store::vectors as vector_store;
use crate::vectors::Block;

/// Fresh documents an Agent may have before a merge: ranking reads each
/// one's row of a word, so this bounds those rows.
pub const FRESH_LIMIT: i64 = 256;
/// Masks an Agent may have before a merge rewrites the segments holding them.
pub const MASK_LIMIT: i64 = 256;
/// Fresh documents one merge takes in, at most.
const BATCH: i64 = 4_096;
/// A segment grows by merging up to this many documents; larger ones are only
/// rewritten to drop masked documents.
const MAX_SEGMENT: i64 = 65_536;
/// Words written per statement.
const WRITE_CHUNK: usize = 2_000;
/// Segments of about one size a merge gathers together (with what it holds
/// already): the fewer, the fewer segments a question reads; the more, the
/// fewer times each posting is rewritten (docs/decisions.md, "Merges gather
/// segments four at a time").
const TIER: usize = 4;

/// What one merge did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Merged {
    /// Fresh documents merged.
    pub fresh: usize,
    /// Segments rewritten into the new ones.
    pub segments: usize,
    /// Masked documents dropped for good.
    pub dropped: usize,
}

/// Merges the Agent's index while it has [`FRESH_LIMIT`] fresh documents or
/// [`MASK_LIMIT`] masks (a few rounds at most), unless another merge of it
/// runs. What a promotion calls after its commit, with the backlog its
/// transaction counted (`known`; else it is read first). Promotions of the
/// same Agent counting side by side miss each other's documents, so each
/// may fall short of a limit: the next promotion, or the sweep, merges then.
pub async fn maintain(pool: &PgPool, agent: AgentId, mut known: Option<Backlog>) -> Result<()> {
    for _ in 0..8 {
        let Backlog { fresh, masks } = match known.take() {
            Some(backlog) => backlog,
            None => store::merge_backlog(&mut *crate::connection(pool).await?, agent).await?,
        };
        if fresh < FRESH_LIMIT && masks < MASK_LIMIT {
            return Ok(());
        }
        match merge(pool, agent, masks >= MASK_LIMIT).await? {
            Some(merged) => tracing::debug!(%agent, ?merged, "merged the index"),
            // Another merge runs; it goes on while there is work.
            None => return Ok(()),
        }
    }
    Ok(())
}

/// The segments (of one language, smallest first) a merge of `fresh` documents
/// rewrites: those with many masked documents (with `purge`, any), then, while
/// at least [`TIER`] - 1 others are each no larger than what is gathered (or
/// fewer, where the cap leaves room for no more), the smallest of those; never
/// more than `cap` documents in all (the first segment aside), so a merge's
/// memory and writes stay bounded however large the Agent; masked segments
/// left out are rewritten by the next merge.
fn choose(segments: &[&Segment], masks_in: &HashMap<i64, i64>, fresh: i64, purge: bool, cap: i64) -> Vec<i64> {
    let mut total = fresh;
    let mut chosen = Vec::new();
    for segment in segments {
        let (masks, size) = (masks_in.get(&segment.id).copied().unwrap_or(0), i64::from(segment.documents));
        let fits = total == 0 || total + size <= cap;
        if masks > 0 && (purge || masks * 4 >= size) && fits {
            chosen.push(segment.id);
            total += size;
        }
    }
    if fresh == 0 {
        return chosen;
    }
    let purged = chosen.clone();
    let mut rest = segments.iter().filter(|s| !purged.contains(&s.id)).peekable();
    loop {
        // The smallest segments no larger than what is gathered so far.
        let mut gathered = total;
        let mut tier = Vec::new();
        while let Some(segment) = rest.next_if(|s| {
            let size = i64::from(s.documents);
            size <= total && gathered + size <= cap
        }) {
            gathered += i64::from(segment.documents);
            tier.push(segment.id);
        }
        if tier.len() + 1 < TIER {
            // Fewer than a tier: wait for more, unless the cap is what stopped
            // it (the next one no larger fits no more): the largest segments
            // grow to the cap as they did, whatever the fresh documents per merge.
            let capped = rest.peek().is_some_and(|s| i64::from(s.documents) <= total);
            if capped && !tier.is_empty() {
                chosen.extend(tier);
            }
            return chosen;
        }
        chosen.extend(tier);
        total = gathered;
    }
}

/// Merges the index of Agents left with a merge to do (another merge of them
/// ran when their promotion finished, or they were masked by deletes): at
/// most `limit` Agents. Returns how many were looked at.
pub async fn maintain_due(pool: &PgPool, limit: i64) -> Result<usize> {
    let agents = {
        let mut conn = crate::connection(pool).await?;
        store::agents_to_merge(&mut conn, FRESH_LIMIT, MASK_LIMIT, limit).await?
    };
    for agent in &agents {
        if let Err(error) = maintain(pool, *agent, None).await {
            tracing::warn!(%agent, %error, "could not merge the index");
        }
    }
    Ok(agents.len())
}

/// One merge of the Agent's index (see the module documentation), whatever
/// its backlog; with `purge`, every segment holding a masked document is
/// rewritten. `None` when another merge of the Agent runs.
pub async fn merge(pool: &PgPool, agent: AgentId, purge: bool) -> Result<Option<Merged>> {
    let mut conn = crate::connection(pool).await?;
    let mut tx = conn.begin().await?;
    if !store::try_lock_merge(&mut tx, agent).await? {
        tx.rollback().await?;
        return Ok(None);
    }
    let fresh = store::fresh_documents(&mut tx, agent, BATCH).await?;
    let masked = store::masked_documents(&mut tx, agent).await?;
    let segments = store::segments_of(&mut tx, agent).await?;
    // Masked documents, and how many each segment holds (a fresh one is
    // dropped if this merge takes it in, else left for a later one).
    let masked_set: HashSet<i64> = masked.iter().map(|(number, _)| *number).collect();
    let mut masks_in: HashMap<i64, i64> = HashMap::new();
    for segment in masked.iter().filter_map(|(_, segment)| *segment) {
        *masks_in.entry(segment).or_default() += 1;
    }
    let mut languages: Vec<Language> = Vec::new();
    let wanted = fresh.iter().map(|d| d.language);
    for language in wanted.chain(segments.iter().filter(|s| masks_in.contains_key(&s.id)).map(|s| s.language)) {
        if !languages.contains(&language) {
            languages.push(language);
        }
    }
    let mut merged = Merged::default();
    for language in languages {
        let fresh: Vec<&Document> = fresh.iter().filter(|d| d.language == language).collect();
        let of_language: Vec<&Segment> = segments.iter().filter(|s| s.language == language).collect();
        let chosen = choose(&of_language, &masks_in, fresh.len() as i64, purge, MAX_SEGMENT);
        if fresh.is_empty() && chosen.is_empty() {
            continue;
        }
        let into = store::new_segment(&mut tx, agent, language).await?;
        let mut documents = store::move_segments(&mut tx, &chosen, into).await?;
        let numbers: Vec<i64> = fresh.iter().map(|d| d.number).collect();
        store::move_fresh(&mut tx, &numbers, into).await?;
        let revisions: Vec<uuid::Uuid> = fresh.iter().map(|d| d.revision_id.0).collect();
        let fresh_terms = store::take_fresh_terms(&mut tx, agent, language, &revisions).await?;
        let old_terms = store::take_segment_terms(&mut tx, &chosen).await?;
        documents.extend(fresh.iter().map(|d| (*d).clone()));
        let (dropped, kept): (Vec<&Document>, Vec<&Document>) =
            documents.iter().partition(|d| masked_set.contains(&d.number));
        let dropped: HashSet<i64> = dropped.iter().map(|d| d.number).collect();
        let by_revision: HashMap<RevisionId, i64> = fresh.iter().map(|d| (d.revision_id, d.number)).collect();
        let words = gather(&old_terms, &fresh_terms, &by_revision, &dropped)?;
        drop((old_terms, fresh_terms));
        let mut lexemes = Vec::with_capacity(WRITE_CHUNK);
        let mut passages = Vec::with_capacity(WRITE_CHUNK);
        let mut encoded = Vec::with_capacity(WRITE_CHUNK);
        for (lexeme, mut list) in words {
            list.sort_unstable();
            list.dedup_by_key(|p| (p.document, p.ordinal));
            lexemes.push(lexeme);
            passages.push(i32::try_from(list.len()).unwrap_or(i32::MAX));
            encoded.push(postings::encode(&list));
            if lexemes.len() == WRITE_CHUNK {
                store::write_segment_terms(&mut tx, agent, language, into, &lexemes, &passages, &encoded).await?;
                (lexemes, passages, encoded) = (Vec::new(), Vec::new(), Vec::new());
            }
        }
        if !lexemes.is_empty() {
            store::write_segment_terms(&mut tx, agent, language, into, &lexemes, &passages, &encoded).await?;
        }
        let kept_numbers: HashSet<i64> = kept.iter().map(|d| d.number).collect();
        carry_vectors(&mut tx, &chosen, &numbers, into, &dropped, &kept_numbers).await?;
        let dropped: Vec<i64> = dropped.into_iter().collect();
        store::drop_documents(&mut tx, &dropped).await?;
        let sizes = kept.iter().fold((0i64, 0i64), |(p, t), d| (p + i64::from(d.passages), t + d.tokens));
        store::finish_segment(&mut tx, into, kept.len() as i64, sizes.0, sizes.1).await?;
        store::drop_segments(&mut tx, &chosen).await?;
        merged.fresh += fresh.len();
        merged.segments += chosen.len();
        merged.dropped += dropped.len();
    }
    tx.commit().await?;
    Ok(Some(merged))
}

/// Carries the vectors of segments `from` and fresh documents `fresh` into
/// segment `into`'s blocks, model by model, leaving `dropped` documents out;
/// the fresh documents' own blocks go (the old segments' go with them).
///
/// A block is written only if it holds every `kept` document: a block of a
/// model is complete or absent, never partial, so a segment without one is
/// what the sweep embeds anew (`crate::embed_due`). A merge during a change
/// of model (documents of both models) leaves its segment answering by words
/// until then.
async fn carry_vectors(
    tx: &mut PgConnection,
    from: &[i64],
    fresh: &[i64],
    into: i64,
    dropped: &HashSet<i64>,
    kept: &HashSet<i64>,
) -> Result<()> {
    let mut by_model: BTreeMap<String, Vec<Block>> = BTreeMap::new();
    for (segment, key, model, bytes) in vector_store::all_blocks(tx, from, fresh).await? {
        let block = Block::from_bytes(&bytes)?;
        by_model.entry(model).or_default().push(if segment { block } else { block.renumbered(key) });
    }
    for (model, blocks) in by_model {
        if let Some(merged) = Block::merged(blocks.iter(), dropped)?
            && merged.numbers().collect::<HashSet<_>>() == *kept
        {
            vector_store::write_segment(tx, into, &model, &merged.to_bytes()).await?;
        }
    }
    vector_store::drop_documents(tx, fresh).await?;
    Ok(())
}

/// Every word's postings from the segments and fresh documents merged,
/// dropped documents left out.
fn gather(
    old: &[(String, Vec<u8>)],
    fresh: &[store::FreshTerm],
    by_revision: &HashMap<RevisionId, i64>,
    dropped: &HashSet<i64>,
) -> Result<BTreeMap<String, Vec<Posting>>> {
    let mut words: BTreeMap<String, Vec<Posting>> = BTreeMap::new();
    for (lexeme, bytes) in old {
        let list = words.entry(lexeme.clone()).or_default();
        postings::decode(bytes, |p| {
            if !dropped.contains(&p.document) {
                list.push(p);
            }
        })
        .ok_or_else(|| Error::Corrupt(format!("the stored postings of {lexeme:?} cannot be read")))?;
    }
    for term in fresh {
        let Some(&document) = by_revision.get(&term.revision_id) else { continue };
        if dropped.contains(&document) {
            continue;
        }
        let list = words.entry(term.lexeme.clone()).or_default();
        let each = term.ordinals.iter().zip(&term.counts).zip(&term.title_counts).zip(&term.lengths);
        list.extend(each.map(|(((ordinal, count), title_count), length)| Posting {
            document,
            ordinal: *ordinal,
            count: *count,
            title_count: *title_count,
            length: *length,
        }));
    }
    words.retain(|_, list| !list.is_empty());
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(id: i64, documents: i32) -> Segment {
        Segment { id, language: Language::En, documents }
    }

    /// A purge after retirements across every segment of a large Agent does
    /// not rewrite the whole index into one segment: it stays within the cap,
    /// and the next merge takes the rest.
    #[test]
    fn a_purge_stays_within_the_cap() {
        let segments = [segment(1, 300), segment(2, 600), segment(3, 900)];
        let refs: Vec<&Segment> = segments.iter().collect();
        let masks: HashMap<i64, i64> = [(1, 1), (2, 1), (3, 1)].into();
        assert_eq!(choose(&refs, &masks, 0, true, 1_000), [1, 2]);
        assert_eq!(choose(&refs, &masks, 0, true, 10_000), [1, 2, 3]);
        // Without a purge, only segments a quarter masked are rewritten.
        assert!(choose(&refs, &masks, 0, false, 10_000).is_empty());
        // A single segment larger than the cap can still be purged alone.
        assert_eq!(choose(&refs[2..], &masks, 0, true, 500), [3]);
    }

    /// Fresh documents gather the smallest segments no larger than them once
    /// there are three, then the next three no larger than all those, and so on.
    #[test]
    fn fresh_documents_gather_segments_three_at_a_time() {
        let sizes = [100, 200, 300, 400, 400, 400, 5_000];
        let segments: Vec<_> = (1..).zip(sizes).map(|(id, size)| segment(id, size)).collect();
        let refs: Vec<&Segment> = segments.iter().collect();
        let none = HashMap::new();
        assert_eq!(choose(&refs, &none, 300, false, 10_000), [1, 2, 3, 4, 5, 6]);
        assert_eq!(choose(&refs, &none, 299, false, 10_000), Vec::<i64>::new(), "two no larger than 299");
        assert_eq!(choose(&refs[..5], &none, 300, false, 10_000), [1, 2, 3], "then two no larger than 900");
        assert_eq!(choose(&refs, &none, 300, false, 1_000), [1, 2, 3], "then over the cap");
        assert_eq!(choose(&refs, &none, 0, false, 10_000), Vec::<i64>::new(), "nothing fresh, nothing masked");
    }

    /// One merge of `fresh` documents into `segments` as [`merge`] makes it,
    /// the new segment numbered `id`: the documents of the segments it rewrote.
    fn merge_into(segments: &mut Vec<Segment>, id: i64, fresh: i64) -> i64 {
        segments.sort_by_key(|s| (s.documents, s.id));
        let refs: Vec<&Segment> = segments.iter().collect();
        let chosen = choose(&refs, &HashMap::new(), fresh, false, MAX_SEGMENT);
        let gathered: i32 = segments.iter().filter(|s| chosen.contains(&s.id)).map(|s| s.documents).sum();
        segments.retain(|s| !chosen.contains(&s.id));
        segments.push(segment(id, fresh as i32 + gathered));
        i64::from(gathered)
    }

    /// An Agent growing by 256 documents a merge rewrites each document about
    /// log4(n / 256) times, not log2, and keeps at most three segments of each
    /// size.
    #[test]
    fn each_document_is_rewritten_about_log4_times() {
        let (fresh, merges) = (256, 256);
        let mut segments: Vec<Segment> = Vec::new();
        let mut rewritten = 0;
        for id in 0..merges {
            rewritten += merge_into(&mut segments, id, fresh);
            let sizes: HashSet<i32> = segments.iter().map(|s| s.documents).collect();
            for size in sizes {
                assert!(segments.iter().filter(|s| s.documents == size).count() <= 3, "{segments:?}");
            }
        }
        // 65,536 documents: a binary counter rewrites each 4 times on average.
        let per_document = rewritten as f64 / (fresh * merges) as f64;
        assert!(per_document <= 3.0, "{per_document} rewrites per document");
        assert_eq!(segments.iter().map(|s| i64::from(s.documents)).sum::<i64>(), fresh * merges);
        assert_eq!(segments.len(), 1, "256 merges of 256 make one segment of 4^4 × 256");
    }

    /// Merges of more than 256 fresh documents still grow the largest
    /// segments to near the cap: with 257, a tier of three of the fourth size
    /// is over it, and two of them are taken.
    #[test]
    fn the_largest_segments_grow_to_the_cap_whatever_the_fresh_documents() {
        for fresh in [257, 300, 1_000, 4_096] {
            let merges = 1_000;
            let mut segments: Vec<Segment> = Vec::new();
            for id in 0..merges {
                merge_into(&mut segments, id, fresh);
                assert!(segments.iter().all(|s| i64::from(s.documents) <= MAX_SEGMENT));
            }
            let documents = fresh * merges;
            let largest = segments.iter().map(|s| s.documents).max().unwrap();
            assert!(largest > 40_000, "{fresh} a merge: the largest segment has {largest} documents");
            let bound = documents / 40_000 + 3 * 4 + 1;
            assert!(segments.len() as i64 <= bound, "{fresh} a merge: {} segments of {documents}", segments.len());
        }
    }
}
