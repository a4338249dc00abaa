//! Fusing the two sides' candidates: BM25F (the question's words) and vectors
//! (its meaning).
//!
//! Plain reciprocal-rank fusion drags a passage found only by meaning below
//! the lexical side's noise: on a question that shares no word with its
//! answer, BM25F's best hits are near misses that share a topic word, and
//! ranks ignore how weak they are. So scores are fused, each side's scaled
//! between the worst and the best of its candidates, and weighted by how
//! strong the lexical match is: the best BM25F score against what the
//! question's words could score at most ([`rank::Lexical::ceiling`](crate::rank::Lexical)).
//! A question none of whose words match well is ranked by its meaning; one
//! in its answer's words keeps most of the lexical order. The weights and
//! their figures are in docs/decisions.md, "Fusing words and meaning".

use std::collections::HashMap;

use crate::vectors::Scanned;

/// Candidates each side offers the fusion.
pub const CANDIDATES: usize = 100;

/// The fusion's weights: the dense side's weight falls from [`HIGH`] (no
/// word of the question matters) to [`LOW`] as the best lexical match
/// reaches [`SHARE`] of what the question's words could score. Figures in
/// docs/decisions.md, "Fusing words and meaning".
pub const LOW: f64 = 0.6;
pub const HIGH: f64 = 1.0;
pub const SHARE: f64 = 0.5;

/// One lexical candidate: (document, ordinal), its BM25F score and the
/// ceiling of its language's question words.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Worded {
    pub document: i64,
    pub ordinal: i32,
    pub score: f64,
    pub ceiling: f64,
}

/// Every candidate of either side with its fused score: (document, ordinal,
/// score). A candidate one side did not offer scores 0 there (for the vector
/// side, its exact cosine when the scan saw its document: `dense.wanted`).
pub fn fuse(worded: &[Worded], dense: &Scanned) -> Vec<(i64, i32, f64)> {
    let mut scored: HashMap<(i64, i32), (f64, Option<f64>)> = HashMap::new();
    for w in worded {
        scored.insert((w.document, w.ordinal), (w.score, None));
    }
    for near in &dense.best {
        scored.entry((near.document, near.ordinal)).or_insert((0.0, None)).1 = Some(f64::from(near.score));
    }
    for ((document, ordinal), score) in &dense.wanted {
        if let Some(entry) = scored.get_mut(&(*document, *ordinal)) {
            entry.1.get_or_insert(f64::from(*score));
        }
    }
    let (dense_low, dense_high) = dense.best.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), n| {
        (low.min(f64::from(n.score)), high.max(f64::from(n.score)))
    });
    let scale = |x: f64, low: f64, high: f64| {
        if high > low {
            ((x - low) / (high - low)).clamp(0.0, 1.0)
        } else if x >= high {
            1.0
        } else {
            0.0
        }
    };
    let dense_of = |d: Option<f64>| d.map_or(0.0, |d| scale(d, dense_low, dense_high));
    // How strong the best lexical match is, against what the question's
    // words could score at most: the weight of meaning follows.
    let strength = worded.iter().map(|w| if w.ceiling > 0.0 { w.score / w.ceiling } else { 0.0 }).fold(0.0, f64::max);
    let alpha = HIGH - (HIGH - LOW) * (strength / SHARE).min(1.0);
    let (bm25_low, bm25_high) =
        worded.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), w| (l.min(w.score), h.max(w.score)));
    scored
        .into_iter()
        .map(|((document, ordinal), (bm25, dense))| {
            let words = if bm25 > 0.0 { scale(bm25, bm25_low, bm25_high) } else { 0.0 };
            (document, ordinal, (1.0 - alpha) * words + alpha * dense_of(dense))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::Near;

    fn near(document: i64, score: f32) -> Near {
        Near { document, ordinal: 0, score }
    }

    fn worded(document: i64, score: f64, ceiling: f64) -> Worded {
        Worded { document, ordinal: 0, score, ceiling }
    }

    fn order(mut fused: Vec<(i64, i32, f64)>) -> Vec<i64> {
        fused.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        fused.into_iter().map(|f| f.0).collect()
    }

    /// A question sharing no word with its answer: the lexical side offers a
    /// weak near miss (a tenth of its ceiling), the vector side the answer.
    /// Scores keep the answer first; ranks (RRF) would not.
    #[test]
    fn a_weak_lexical_match_does_not_bury_what_only_meaning_finds() {
        let worded = [worded(1, 1.0, 10.0)];
        let dense = Scanned { best: vec![near(2, 0.8), near(1, 0.3), near(3, 0.1)], wanted: HashMap::new() };
        assert_eq!(order(fuse(&worded, &dense))[0], 2);
        // Reciprocal-rank fusion (k = 60) would put the near miss first: it
        // is in both lists.
        let rrf = |document: i64| {
            let words = worded.iter().position(|w| w.document == document).map_or(0.0, |r| 1.0 / (61.0 + r as f64));
            words + dense.best.iter().position(|n| n.document == document).map_or(0.0, |r| 1.0 / (61.0 + r as f64))
        };
        assert!(rrf(1) > rrf(2));
    }

    /// A question in its answer's words: a strong lexical match wins over a
    /// passage that is only close in meaning.
    #[test]
    fn a_strong_lexical_match_keeps_its_place() {
        let worded = [worded(1, 9.0, 10.0), worded(4, 0.5, 10.0)];
        let mut dense = Scanned { best: vec![near(2, 0.9), near(1, 0.7), near(3, 0.2)], wanted: HashMap::new() };
        dense.wanted.insert((4, 0), 0.1);
        let fused = fuse(&worded, &dense);
        assert_eq!(order(fused.clone())[0], 1);
        assert_eq!(fused.len(), 4, "every candidate of either side");
    }

    #[test]
    fn without_the_vector_side_the_lexical_order_stands() {
        let worded = [worded(1, 2.0, 10.0), worded(2, 3.0, 10.0), worded(3, 1.0, 10.0)];
        assert_eq!(order(fuse(&worded, &Scanned::default())), [2, 1, 3]);
    }
}
