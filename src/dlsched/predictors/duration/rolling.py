"""Rolling estimate P_R of Helios Algorithm 1 (§4.2.2), kept incrementally.

Every statistic is a running sum, so ``observe`` and ``predict`` are O(1) apart from one
Levenshtein search over the user's own name buckets when the exact bucket is unknown (cached).
Branches, in the paper's order:

1. new (never seen) user → mean duration of all past jobs with the same GPU demand;
2. known user, a past job with the same or a similar name bucket → exponentially weighted
   decay over that bucket's durations (most recent weighs most);
3. known user, no similar name → mean of that user's past jobs with the same GPU demand;

with fallbacks when a mean has no data: global same-GPU mean → user's mean → global mean →
``default_duration``.

Anonymous jobs (no user, e.g. all of Philly) are not "new users": with
``anonymous="vc_gpus"`` (default) P_R is the exponentially weighted decay over the most recent
finished jobs of the same VC and GPU demand — a stand-in for "this user's recent runs", since
consecutive jobs in a VC are mostly one team repeating an experiment (on Philly it ranks
durations far better than the GPU-demand mean; see docs/duration.md).
``anonymous="new_user"`` applies branch 1 literally.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.predictors.duration.names import closest_name, is_anonymous, job_bucket
from dlsched.predictors.duration.observed import observed_duration

NEW_USER = "new_user"
ANON_STREAM = "anon_vc_gpus"
ANONYMOUS_MODES: tuple[str, ...] = ("vc_gpus", "new_user")
NAME_MATCH = "name_match"
USER_GPUS = "user_gpus"
FALLBACK = "fallback"


class _Mean:
    """Running mean (count, sum)."""

    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x

    @property
    def value(self) -> float:
        return self.total / self.n


class _Decayed:
    """Exponentially weighted mean: the k-th most recent value weighs ``decay**k``.

    Kept as two decayed sums, so the whole history costs O(1) memory.
    """

    __slots__ = ("weight", "weighted")

    def __init__(self) -> None:
        self.weighted = 0.0
        self.weight = 0.0

    def add(self, x: float, decay: float) -> None:
        self.weighted = self.weighted * decay + x
        self.weight = self.weight * decay + 1.0

    @property
    def value(self) -> float:
        return self.weighted / self.weight


class _UserHistory:
    __slots__ = ("bucket_list", "buckets", "by_gpus", "fuzzy", "total")

    def __init__(self) -> None:
        self.total = _Mean()
        self.by_gpus: dict[int, _Mean] = {}
        self.buckets: dict[str, _Decayed] = {}          # insertion/refresh order = recency
        self.bucket_list: list[str] | None = None        # cached key list for rapidfuzz
        self.fuzzy: dict[str, str | None] = {}           # bucket → matched bucket (valid for bucket_list)


class RollingEstimator:
    """Incremental P_R. Call ``observe(job)`` when a job ends, ``predict(job)`` any time.

    ``decay``: weight ratio between consecutive same-name jobs (0.5: each older job counts half).
    ``min_similarity``: normalised Levenshtein similarity (0..1) for two name buckets to match.
    ``max_buckets_per_user``: least recently seen buckets beyond this are forgotten (bounds
    memory and the cost of the similarity search).
    ``anonymous``: how jobs without a user are estimated (``vc_gpus`` or ``new_user``, above).
    """

    def __init__(self, decay: float = 0.5, min_similarity: float = 0.8,
                 max_buckets_per_user: int = 256, default_duration: float = 3600.0,
                 anonymous: str = "vc_gpus") -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        if anonymous not in ANONYMOUS_MODES:
            raise ValueError(f"anonymous must be one of {', '.join(ANONYMOUS_MODES)}, got {anonymous!r}")
        self.anonymous = anonymous
        self.decay = decay
        self.min_similarity = min_similarity
        self.max_buckets_per_user = max_buckets_per_user
        self.default_duration = default_duration
        self._total = _Mean()
        self._by_gpus: dict[int, _Mean] = {}
        self._users: dict[str, _UserHistory] = {}
        self._anon: dict[tuple[str, int], _Decayed] = {}

    @property
    def n_observed(self) -> int:
        return self._total.n

    def observe(self, job: Job, duration: float | None = None) -> None:
        """Add a finished job's duration to every statistic it belongs to: what its finish
        revealed (:func:`observed_duration`), or ``duration``, what history recorded for it."""
        d = observed_duration(job) if duration is None else duration
        self._total.add(d)
        self._by_gpus.setdefault(job.gpus, _Mean()).add(d)
        if is_anonymous(job.user):
            if self.anonymous == "vc_gpus":
                self._anon.setdefault((job.vc, job.gpus), _Decayed()).add(d, self.decay)
            return
        u = self._users.get(job.user)
        if u is None:
            u = self._users[job.user] = _UserHistory()
        u.total.add(d)
        u.by_gpus.setdefault(job.gpus, _Mean()).add(d)
        b = job_bucket(job)
        if not b:
            return
        stat = u.buckets.pop(b, None)
        if stat is None:
            stat = _Decayed()
            u.bucket_list = None
            u.fuzzy.clear()
            if len(u.buckets) >= self.max_buckets_per_user:
                del u.buckets[next(iter(u.buckets))]
        stat.add(d, self.decay)
        u.buckets[b] = stat            # re-insert: most recent last

    def _global_gpu_mean(self, gpus: int) -> float | None:
        m = self._by_gpus.get(gpus)
        if m is not None:
            return m.value
        return self._total.value if self._total.n else None

    def predict_branch(self, job: Job) -> tuple[float, str]:
        """``(P_R in seconds, branch)``; branch is one of NEW_USER, NAME_MATCH, USER_GPUS,
        ANON_STREAM, FALLBACK."""
        if is_anonymous(job.user):
            stream = self._anon.get((job.vc, job.gpus))
            if stream is not None:
                return stream.value, ANON_STREAM
            u = None
        else:
            u = self._users.get(job.user)
        if u is None:
            v = self._global_gpu_mean(job.gpus)
            return (v, NEW_USER) if v is not None else (self.default_duration, FALLBACK)
        b = job_bucket(job)
        if b:
            stat = u.buckets.get(b)
            if stat is None and u.buckets:
                if b in u.fuzzy:
                    match = u.fuzzy[b]
                else:
                    if u.bucket_list is None:
                        u.bucket_list = list(u.buckets)
                    match = u.fuzzy[b] = closest_name(b, u.bucket_list, self.min_similarity)
                stat = None if match is None else u.buckets.get(match)
            if stat is not None:
                return stat.value, NAME_MATCH
        m = u.by_gpus.get(job.gpus)
        if m is not None:
            return m.value, USER_GPUS
        v = self._by_gpus[job.gpus].value if job.gpus in self._by_gpus else u.total.value
        return v, FALLBACK

    def predict(self, job: Job) -> float:
        """P_R in seconds, from the jobs observed so far."""
        return self.predict_branch(job)[0]
