//! Lexical ranking: BM25F over the passages of an Agent's active revisions,
//! in the language each was indexed in (so answers stay right after the
//! Agent's language changes): the title counts twice, document frequencies
//! and lengths are the Agent's own.

use std::collections::HashMap;

use futures_util::TryStreamExt;
use sqlx::PgConnection;
use svc_ids::{AgentId, RevisionId, SourceId};

use crate::Language;
use crate::error::{Error, Result};
use crate::postings::{self, Posting};
use crate::store::terms::{self as store, Vocabulary};

/// How ranking weighs what it finds (BM25F: BM25 over title and text, with title
/// occurrences counted `title_weight` times).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bm25 {
    pub k1: f64,
    pub b: f64,
    pub title_weight: f64,
}

/// BM25's usual constants, and a title counted twice. Not tuned to any
/// evaluation set.
pub const WEIGHTS: Bm25 = Bm25 { k1: 1.2, b: 0.75, title_weight: 2.0 };

/// Words of a question ranking uses, at most: the rarest. Common words add
/// little to a score and the most postings to read, so a long question costs
/// no more than this many words.
pub const MAX_TERMS: usize = 32;

/// A passage as ranking found it: the best of its source.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    pub source_id: SourceId,
    pub revision_id: RevisionId,
    pub ordinal: i32,
    pub score: f64,
}

/// The best passage of each of the best `limit` sources, best first
/// (equal scores by source id), with its score, ranked by the first (rarest)
/// [`MAX_TERMS`] terms of `vocabulary`.
///
/// Each word's postings are read whole (a few merged segments and the fresh
/// documents' rows), masked documents left out, so its document frequency is
/// exact: the number of passages of active revisions holding it.
pub async fn rank(
    conn: &mut PgConnection,
    agent: AgentId,
    language: Language,
    vocabulary: &Vocabulary,
    limit: usize,
) -> Result<Vec<Ranked>> {
    let lexical = candidates(conn, agent, language, vocabulary, limit).await?;
    let numbers: Vec<i64> = lexical.passages.iter().map(|c| c.0).collect();
    let documents: HashMap<i64, (RevisionId, SourceId)> = store::documents(conn, &numbers)
        .await?
        .into_iter()
        .map(|(number, of)| (number, (of.revision, of.source)))
        .collect();
    Ok(best(&lexical.passages, &documents, limit))
}

/// What the lexical side found for a question in one language.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lexical {
    /// The best passage of each of the best documents (and every one tied
    /// with the last): (document, ordinal, BM25F score).
    pub passages: Vec<(i64, i32, f64)>,
    /// What a passage would score holding each of the question's chosen
    /// words without end (each word's limit, idf × (k1 + 1)), summed: the
    /// scale a score's strength is judged on.
    pub ceiling: f64,
}

/// The best passage of each of the best `limit` documents for the first
/// (rarest) [`MAX_TERMS`] terms of `vocabulary` (see [`rank`]).
pub async fn candidates(
    conn: &mut PgConnection,
    agent: AgentId,
    language: Language,
    vocabulary: &Vocabulary,
    limit: usize,
) -> Result<Lexical> {
    // The rarest MAX_TERMS words by their exact frequencies. The counts read
    // include masked documents' passages, at most `masked_passages` too many:
    // every word that could be among the rarest is read, then they are chosen.
    let terms = &vocabulary.terms;
    if terms.is_empty() {
        return Ok(Lexical::default());
    }
    let excess = vocabulary.masked_passages;
    let mut read = terms.len().min(MAX_TERMS);
    if terms.len() > MAX_TERMS && !vocabulary.masked.is_empty() {
        let bound = terms[MAX_TERMS - 1].1;
        read = terms.iter().take_while(|(_, df)| df - excess <= bound).count();
    }
    let mut lexemes: Vec<String> = Vec::new();
    let mut held: Vec<Vec<Posting>> = Vec::new();
    let chosen = loop {
        let more: Vec<String> = terms[lexemes.len()..read].iter().map(|(lexeme, _)| lexeme.clone()).collect();
        held.extend(postings_of(conn, agent, language, &more, &vocabulary.masked).await?);
        lexemes.extend(more);
        let mut chosen: Vec<usize> = (0..held.len()).filter(|i| !held[*i].is_empty()).collect();
        chosen.sort_by(|a, b| held[*a].len().cmp(&held[*b].len()).then_with(|| lexemes[*a].cmp(&lexemes[*b])));
        chosen.truncate(MAX_TERMS);
        // A word not read holds at least its count less the excess.
        let settled = read == terms.len()
            || vocabulary.masked.is_empty()
            || (chosen.len() == MAX_TERMS
                && chosen.last().is_some_and(|last| (held[*last].len() as f64) < terms[read].1 - excess));
        if settled {
            break chosen;
        }
        read = (read + MAX_TERMS).min(terms.len());
    };
    let mut scores = Scores::default();
    let mut ceiling = 0.0;
    for i in chosen {
        let idf = vocabulary.idf(held[i].len() as f64);
        ceiling += idf * (WEIGHTS.k1 + 1.0);
        scores.add(&held[i], idf, vocabulary.mean_length.max(1.0));
    }
    Ok(Lexical { passages: scores.candidates(limit), ceiling })
}

/// Each word's postings in the Agent's segments and fresh documents of
/// `language`, masked documents (`masked`, ascending) left out.
async fn postings_of(
    conn: &mut PgConnection,
    agent: AgentId,
    language: Language,
    lexemes: &[String],
    masked: &[i64],
) -> Result<Vec<Vec<Posting>>> {
    let mut held: Vec<Vec<Posting>> = vec![Vec::new(); lexemes.len()];
    if lexemes.is_empty() {
        return Ok(held);
    }
    let index: HashMap<&str, usize> = lexemes.iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
    let kept = |document: i64| masked.binary_search(&document).is_err();
    for (lexeme, bytes) in store::segment_postings(conn, agent, language, lexemes).await? {
        let Some(&i) = index.get(lexeme.as_str()) else { continue };
        let list = &mut held[i];
        postings::decode(&bytes, |p| {
            if kept(p.document) {
                list.push(p);
            }
        })
        .ok_or_else(|| Error::Corrupt(format!("the stored postings of {lexeme:?} cannot be read")))?;
    }
    let mut fresh = store::postings(conn, agent, language, lexemes);
    while let Some(row) = fresh.try_next().await? {
        let Some(&i) = index.get(row.lexeme.as_str()) else { continue };
        if !kept(row.document) {
            continue;
        }
        let each = row.ordinals.iter().zip(&row.counts).zip(&row.title_counts).zip(&row.lengths);
        held[i].extend(each.map(|(((ordinal, count), title_count), length)| Posting {
            document: row.document,
            ordinal: *ordinal,
            count: *count,
            title_count: *title_count,
            length: *length,
        }));
    }
    Ok(held)
}

/// Best score first; scores equal to 9 decimal places by source id. (Postings
/// arrive in no set order, so the same sum can differ in its last bits.)
pub(crate) fn ranking_order(a: (f64, SourceId), b: (f64, SourceId)) -> std::cmp::Ordering {
    let rounded = |score: f64| (score * 1e9).round();
    rounded(b.0).total_cmp(&rounded(a.0)).then_with(|| a.1.cmp(&b.1))
}

/// Scores per passage: (document, ordinal).
#[derive(Default)]
struct Scores {
    passages: HashMap<(i64, i32), f64>,
}

impl Scores {
    /// Adds one word's BM25F contribution to every passage of `postings`.
    fn add(&mut self, postings: &[Posting], idf: f64, mean_length: f64) {
        let Bm25 { k1, b, title_weight } = WEIGHTS;
        self.passages.reserve(postings.len());
        for p in postings {
            let tf = f64::from(p.count) + (title_weight - 1.0) * f64::from(p.title_count);
            let norm = k1 * (1.0 - b + b * f64::from(p.length) / mean_length);
            *self.passages.entry((p.document, p.ordinal)).or_default() += idf * tf * (k1 + 1.0) / (tf + norm);
        }
    }

    /// The best passage of each document, (document, ordinal, score): the best
    /// `limit`, and every other scoring as well as the last of them to 9
    /// decimal places (ties are ordered by source id, not known here).
    fn candidates(self, limit: usize) -> Vec<(i64, i32, f64)> {
        let mut best: HashMap<i64, (i32, f64)> = HashMap::new();
        for ((document, ordinal), score) in self.passages {
            if score <= 0.0 {
                continue;
            }
            // The first of equal scores: the earliest passage.
            let kept = best.entry(document).or_insert((ordinal, score));
            if score > kept.1 || (score == kept.1 && ordinal < kept.0) {
                *kept = (ordinal, score);
            }
        }
        let rounded = |score: f64| (score * 1e9).round();
        let mut best: Vec<(i64, i32, f64)> = best.into_iter().map(|(d, (o, s))| (d, o, s)).collect();
        best.sort_by(|a, b| rounded(b.2).total_cmp(&rounded(a.2)).then(a.0.cmp(&b.0)));
        if best.len() > limit && limit > 0 {
            let last = rounded(best[limit - 1].2);
            let tied = best[limit..].iter().take_while(|c| rounded(c.2) == last).count();
            best.truncate(limit + tied);
        }
        best
    }
}

/// The best passage of each of the best `limit` sources, from the candidates
/// of [`Scores::candidates`] and their documents' revisions and sources.
pub(crate) fn best(
    candidates: &[(i64, i32, f64)],
    documents: &HashMap<i64, (RevisionId, SourceId)>,
    limit: usize,
) -> Vec<Ranked> {
    let mut best: HashMap<SourceId, Ranked> = HashMap::new();
    for (document, ordinal, score) in candidates {
        let Some((revision_id, source_id)) = documents.get(document) else { continue };
        let ranked = Ranked { source_id: *source_id, revision_id: *revision_id, ordinal: *ordinal, score: *score };
        match best.get(source_id) {
            Some(kept) if kept.score >= ranked.score => {}
            _ => {
                best.insert(*source_id, ranked);
            }
        }
    }
    let mut best: Vec<Ranked> = best.into_values().collect();
    best.sort_by(|a, b| ranking_order((a.score, a.source_id), (b.score, b.source_id)));
    best.truncate(limit);
    best
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn postings(document: i64, held: &[(i32, i16, i16, i32)]) -> Vec<Posting> {
        held.iter().map(|h| Posting { document, ordinal: h.0, count: h.1, title_count: h.2, length: h.3 }).collect()
    }

    fn ranked(scores: Scores, documents: &[(i64, RevisionId, SourceId)], limit: usize) -> Vec<Ranked> {
        let documents = documents.iter().map(|(d, r, s)| (*d, (*r, *s))).collect();
        best(&scores.candidates(limit), &documents, limit)
    }

    #[test]
    fn scores_add_up_per_passage_and_each_source_keeps_its_best() {
        let (a, b, c) = (SourceId(Uuid::from_u128(1)), SourceId(Uuid::from_u128(2)), SourceId(Uuid::from_u128(3)));
        let (ra, rb, rc) = (RevisionId::new(), RevisionId::new(), RevisionId::new());
        let mut scores = Scores::default();
        // Source a: passage 3 holds both words, passage 0 only one.
        scores.add(&postings(1, &[(0, 1, 0, 10), (3, 1, 0, 10)]), 1.0, 10.0);
        scores.add(&postings(1, &[(3, 1, 0, 10)]), 1.0, 10.0);
        // Source b: one occurrence, in the title too (counted twice).
        scores.add(&postings(3, &[(7, 1, 1, 10)]), 1.0, 10.0);
        // Source c: the same score as b, with a lower document number.
        scores.add(&postings(2, &[(1, 1, 1, 10)]), 1.0, 10.0);
        let best = ranked(scores, &[(1, ra, a), (3, rb, b), (2, rc, c)], 2);
        // tf 1, length at the mean: 2.2 / 2.2 = 1 per word; tf 2: 4.4 / 3.2.
        assert_eq!(best.len(), 2);
        assert_eq!((best[0].source_id, best[0].revision_id, best[0].ordinal), (a, ra, 3));
        assert!((best[0].score - 2.0).abs() < 1e-12);
        // b and c tie: the lower source id first (not the lower document), and
        // the limit drops c.
        assert_eq!((best[1].source_id, best[1].ordinal), (b, 7));
        assert!((best[1].score - 4.4 / 3.2).abs() < 1e-12);
    }

    #[test]
    fn longer_passages_score_less_for_the_same_count() {
        let (source, revision) = (SourceId::new(), RevisionId::new());
        let mut scores = Scores::default();
        scores.add(&postings(9, &[(0, 1, 0, 40), (1, 1, 0, 5)]), 1.0, 10.0);
        assert_eq!(ranked(scores, &[(9, revision, source)], 1)[0].ordinal, 1);
    }

    #[test]
    fn every_tie_at_the_cut_stays_a_candidate() {
        let mut scores = Scores::default();
        for document in 1..=20 {
            scores.add(&postings(document, &[(0, 1, 0, 10)]), 1.0, 10.0);
        }
        scores.add(&postings(21, &[(0, 3, 0, 10)]), 1.0, 10.0);
        scores.add(&postings(22, &[(0, 1, 0, 80)]), 1.0, 10.0);
        let candidates = scores.candidates(5);
        assert_eq!(candidates.len(), 21, "the best and all 20 tied with the fifth");
        assert_eq!(candidates[0].0, 21);
    }
}
