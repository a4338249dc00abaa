//! `embed` against the vectors model2vec itself computed for the package's 16
//! reference sentences (`reference/` of `scripts/fetch-model`), and int8
//! vectors against f32 on the same sentences.

#[path = "../src/testing.rs"]
mod testing;

use std::fs;

use svc_embed::{Quantized, StaticModel, cosine_q, quantize};

/// The sentences and model2vec's vectors for them.
fn reference() -> (Vec<String>, Vec<Vec<f32>>) {
    let dir = testing::model_dir().join("reference");
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; run scripts/fetch-model", path.display()))
    };
    let sentences: Vec<String> = String::from_utf8(read("sentences.txt"))
        .expect("sentences.txt is UTF-8")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let vectors = npy_f32_matrix(&read("minishlab_potion_base_8m.npy"));
    assert_eq!(vectors.len(), sentences.len());
    (sentences, vectors)
}

/// A C-order little-endian f32 matrix from a `.npy` file (format 1.0: magic,
/// version, u16 header length, a Python dict literal, the data).
fn npy_f32_matrix(bytes: &[u8]) -> Vec<Vec<f32>> {
    let (magic, rest) = bytes.split_at(8);
    assert_eq!(magic, b"\x93NUMPY\x01\x00", "npy format 1.0");
    let (length, rest) = rest.split_at(2);
    let (header, data) = rest.split_at(usize::from(u16::from_le_bytes([length[0], length[1]])));
    let header = String::from_utf8_lossy(header);
    assert!(header.contains("'descr': '<f4'") && header.contains("'fortran_order': False"), "{header}");
    let shape = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).expect("a shape in {header}");
    let dims: Vec<usize> = shape.split(',').filter_map(|d| d.trim().parse().ok()).collect();
    let [rows, cols] = dims[..] else { panic!("not a matrix: {header}") };
    assert_eq!(data.len(), rows * cols * 4);
    let values: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    values.chunks(cols).map(<[f32]>::to_vec).collect()
}

fn model() -> StaticModel {
    StaticModel::load(&testing::model_dir()).unwrap_or_else(|e| panic!("{e}"))
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The index of the sentence most similar to sentence `i`, other than itself.
fn nearest(i: usize, n: usize, score: impl Fn(usize, usize) -> f32) -> usize {
    (0..n).filter(|&j| j != i).max_by(|&a, &b| score(i, a).total_cmp(&score(i, b))).expect("two sentences or more")
}

#[test]
fn embed_matches_model2vec_on_the_reference_sentences() {
    let model = model();
    let (sentences, expected) = reference();
    assert_eq!(sentences.len(), 16);
    for (sentence, expected) in sentences.iter().zip(&expected) {
        let actual = model.embed(sentence);
        assert_eq!(actual.len(), 256);
        let worst = actual.iter().zip(expected).map(|(a, e)| (a - e).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-5, "{sentence}: differs by {worst}");
    }
}

#[test]
fn int8_cosines_stay_within_a_hundredth_and_keep_nearest_neighbours() {
    let model = model();
    let (sentences, _) = reference();
    let exact: Vec<Vec<f32>> = sentences.iter().map(|s| model.embed(s)).collect();
    let quantized: Vec<Quantized> = exact.iter().map(|v| quantize(v)).collect();
    let n = sentences.len();
    let mut worst = 0f32;
    for i in 0..n {
        for j in 0..n {
            worst = worst.max((cosine(&exact[i], &exact[j]) - cosine_q(&quantized[i], &quantized[j])).abs());
        }
    }
    assert!(worst < 0.01, "int8 cosine off by {worst}");
    for (i, sentence) in sentences.iter().enumerate() {
        let by_f32 = nearest(i, n, |a, b| cosine(&exact[a], &exact[b]));
        let by_int8 = nearest(i, n, |a, b| cosine_q(&quantized[a], &quantized[b]));
        assert_eq!(by_f32, by_int8, "nearest to {sentence:?}");
    }
}

#[test]
fn int8_vectors_survive_their_bytes() {
    let model = model();
    let (sentences, _) = reference();
    for sentence in &sentences {
        let q = quantize(&model.embed(sentence));
        assert_eq!(q.to_bytes().len(), 7 + 256);
        assert_eq!(Quantized::from_bytes(&q.to_bytes()).as_ref(), Ok(&q));
    }
}
