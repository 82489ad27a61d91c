"""Job-name bucketing and Levenshtein matching for the Helios duration estimator.

Raw job names are sparse (run numbers, seeds, learning rates, dates, hashes), so jobs that are
"the same experiment" rarely share an exact name. Bucketing removes the varying parts; the
Levenshtein distance (rapidfuzz) then matches buckets that still differ slightly
(Helios §4.2.2: "cluster the names and bucketize similar ones").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from dlsched.core.job import Job

# Users that carry no identity (Philly has no user column; loaders fill these in).
ANONYMOUS_USERS: frozenset[str] = frozenset({"", "unknown", "none", "nan", "null", "-"})

_HEX_ID = re.compile(r"(?<![0-9a-z])(?=[0-9a-f]*\d)[0-9a-f]{8,}(?![0-9a-z])")
_DIGITS = re.compile(r"\d+")
_SEPARATORS = re.compile(r"[\s_\-.,:;/=+@]+")
_REPEATED_NUMBERS = re.compile(r"#(?:_#)+")
# Trailing tokens that only distinguish repetitions of one experiment (``_v#``, ``_run#``...).
_TRAILING_MARKER = re.compile(r"(?:v|r|run|try|trial|seed|rep|iter|it|ep|epoch|step|part|copy|retry|job|t)?#")


def name_bucket(name: str) -> str:
    """Map a raw job name to its bucket: lower case, basename, numbers/hashes → ``#``,
    separators → ``_``, trailing repetition markers (``_run#``, ``_seed#``, ``_#``) dropped.

    ``"BERT-finetune_lr1e-4_seed3"`` → ``"bert_finetune_lr#e"``. An empty name gives ``""``
    (no name information); a purely numeric name gives ``"#"``.
    """
    s = name.strip().lower()
    if not s:
        return ""
    s = s.rstrip("/").rsplit("/", 1)[-1]
    s = _HEX_ID.sub("#", s)
    s = _DIGITS.sub("#", s)
    s = _SEPARATORS.sub("_", s).strip("_")
    s = _REPEATED_NUMBERS.sub("#", s)
    tokens = s.split("_")
    while len(tokens) > 1 and _TRAILING_MARKER.fullmatch(tokens[-1]):
        tokens.pop()
    return "_".join(tokens) or "#"


def informative_name(name: str, job_id: str) -> str:
    """The name if it says something about the job, else ``""``: a name equal to the job id
    (Philly's ``sia_%06d``) identifies one job only and must not be matched against others."""
    return "" if not name or name == job_id else name


#: distinct names :func:`job_bucket` remembers (least recently used go first); only caps memory
BUCKET_CACHE_SIZE = 200_000
_cached_bucket = lru_cache(maxsize=BUCKET_CACHE_SIZE)(name_bucket)


def job_bucket(job: Job) -> str:
    """Name bucket of ``job`` (``""`` when its name says nothing), memoised for the process.

    Traces repeat the same names over and over. P_R (:mod:`.rolling`) and P_M's features
    (:mod:`.features`) both bucket every job they see and share this one cache, so each distinct
    name is bucketed once. ``name_bucket`` is a pure function: sharing cannot change a result.
    """
    return _cached_bucket(informative_name(job.name, job.job_id))


def is_anonymous(user: str) -> bool:
    """True for placeholder users (e.g. Philly's ``unknown``) that must not be treated as one person."""
    return user.strip().lower() in ANONYMOUS_USERS


def closest_name(bucket: str, choices: Sequence[str], min_similarity: float) -> str | None:
    """The choice with the highest normalised Levenshtein similarity to ``bucket`` if it
    reaches ``min_similarity`` (1 = identical), else None. Exact matches short-cut in C."""
    if not bucket or not choices:
        return None
    hit = process.extractOne(bucket, choices, scorer=Levenshtein.normalized_similarity,
                             score_cutoff=min_similarity)
    return None if hit is None else hit[0]


class NameClusterer:
    """Assigns stable integer ids to name buckets, merging a new bucket into the most similar
    known one (Levenshtein) so the GBDT sees a dense categorical feature.

    ``add`` grows the vocabulary (training data only); ``lookup`` never does, so predicting
    cannot change what the model was trained on.
    """

    def __init__(self, min_similarity: float = 0.8) -> None:
        self.min_similarity = min_similarity
        self._ids: dict[str, int] = {}      # every bucket seen → cluster id
        self._canonical: list[str] = []     # one representative bucket per cluster id
        self._miss: dict[str, int] = {}     # lookup cache for unseen buckets (-1 = no match)
        self._miss_size = 0                 # vocabulary size when ``_miss`` was filled

    def __len__(self) -> int:
        return len(self._canonical)

    def _match(self, bucket: str) -> int:
        hit = closest_name(bucket, self._canonical, self.min_similarity)
        return -1 if hit is None else self._ids[hit]

    def add(self, bucket: str) -> int:
        """Id of ``bucket``, creating a cluster when no known bucket is similar enough."""
        if not bucket:
            return -1
        cid = self._ids.get(bucket)
        if cid is None:
            cid = self._match(bucket)
            if cid < 0:
                cid = len(self._canonical)
                self._canonical.append(bucket)
            self._ids[bucket] = cid
        return cid

    def lookup(self, bucket: str) -> int:
        """Id of ``bucket`` or of its closest known cluster; -1 (missing) when none is similar."""
        cid = self._ids.get(bucket)
        if cid is not None:
            return cid
        if not bucket:
            return -1
        if self._miss_size != len(self._canonical):
            self._miss.clear()
            self._miss_size = len(self._canonical)
        cid = self._miss.get(bucket)
        if cid is None:
            cid = self._miss[bucket] = self._match(bucket)
        return cid
