"""BM25 baseline for `svc-bench answers`: nDCG@5 of bm25s (English stemmer and
stop words, default parameters) over each document's title and text, on the
same documents and questions. Prints one number.

Needs `pip install bm25s PyStemmer`. Usage: bm25_baseline.py DATASET_DIR
"""
import json
import math
import sys

import bm25s
import Stemmer

folder = sys.argv[1]
documents = [json.loads(line) for line in open(f"{folder}/corpus.jsonl") if line.strip()]
queries = [json.loads(line) for line in open(f"{folder}/queries.jsonl") if line.strip()]
judged = {}
for line in open(f"{folder}/qrels/test.tsv").read().splitlines()[1:]:
    query, document, grade = line.split("\t")
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
    found, _ = retriever.retrieve(tokens, k=5, show_progress=False)
    scores.append(ndcg5([documents[i]["_id"] for i in found[0]], judged.get(query["_id"], {})))
print(f"{sum(scores) / len(scores):.4f}")
