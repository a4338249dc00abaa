"""BM25 baseline for `svc-bench answers`: nDCG@5 of bm25s (English stemmer and
stop words, default parameters) over each document's title and text, on the
same documents and questions, from a BEIR-format folder (corpus.jsonl,
queries.jsonl, qrels/test.tsv).

Prints the nDCG@5 over all questions alone on the first line; then, when the
questions carry a `kind`, one line per kind in the order the kinds first
appear: `KIND NDCG@5 (N questions)`. With --json it prints instead one JSON
object, `{"ndcg5": {QUERY_ID: NDCG@5, ...}}` (what `svc-bench answers` reads).

Needs the packages of bm25_baseline.requirements.txt (`svc-bench answers`
installs them into target/bm25-venv; by hand: `pip install -r
bench/bm25_baseline.requirements.txt`).

Usage: bm25_baseline.py [--json] DATASET_DIR
"""
import argparse
import json
import math

import bm25s
import Stemmer

parser = argparse.ArgumentParser(description="nDCG@5 of BM25 (bm25s) on a BEIR-format folder")
parser.add_argument("--json", action="store_true", help="print each question's nDCG@5 as JSON")
parser.add_argument("folder")
arguments = parser.parse_args()
folder = arguments.folder

documents = [json.loads(line) for line in open(f"{folder}/corpus.jsonl") if line.strip()]
queries = [json.loads(line) for line in open(f"{folder}/queries.jsonl") if line.strip()]
judged = {}
for line in open(f"{folder}/qrels/test.tsv").read().splitlines()[1:]:
    if not line.strip():
        continue
    query, document, grade = line.split("\t")[:3]
    judged.setdefault(query, {})[document] = int(grade)


def ndcg5(ranked, grades):
    """Standard nDCG@5: linear gains, the ideal ranking from the judgments."""
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:5]))
    ideal = sorted(grades.values(), reverse=True)[:5]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


stemmer = Stemmer.Stemmer("english")
corpus = [f"{d['title']}\n{d['text']}" for d in documents]
retriever = bm25s.BM25()
retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
scores = []
for query in queries:
    tokens = bm25s.tokenize([query["text"]], stopwords="en", stemmer=stemmer, show_progress=False)
    found, _ = retriever.retrieve(tokens, k=min(5, len(documents)), show_progress=False)
    scores.append(ndcg5([documents[i]["_id"] for i in found[0]], judged.get(query["_id"], {})))

if arguments.json:
    print(json.dumps({"ndcg5": {query["_id"]: score for query, score in zip(queries, scores)}}))
else:
    print(f"{sum(scores) / len(scores):.4f}")
    kinds = {}
    if any("kind" in query for query in queries):
        for query, score in zip(queries, scores):
            kinds.setdefault(query.get("kind", "(no kind)"), []).append(score)
    for kind, of_kind in kinds.items():
        print(f"{kind} {sum(of_kind) / len(of_kind):.4f} ({len(of_kind)} questions)")
