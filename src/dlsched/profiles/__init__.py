"""Readers for measured co-location profile sets (Lucid, Gavel) as typed profiles and pairs.

No data ships here: the tables have their own licenses and live in ``../shared/profiles`` (or
wherever ``$DLSCHED_PROFILES`` / an explicit directory points). See docs/interference.md.
"""

from dlsched.profiles.gavel import GAVEL_GPU_TYPES, load_gavel
from dlsched.profiles.location import profiles_dir
from dlsched.profiles.lucid import LUCID_GPU_TYPE, load_lucid
from dlsched.profiles.table import ProfileError, ProfileSet

__all__ = ["GAVEL_GPU_TYPES", "LUCID_GPU_TYPE", "ProfileError", "ProfileSet", "load_gavel", "load_lucid",
           "profiles_dir"]
