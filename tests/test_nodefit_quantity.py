"""The quantity parser: every suffix, exact arithmetic, kube's rounding, and what is not a quantity."""

from fractions import Fraction

import pytest

from dlsched.service.nodefit.quantity import QuantityError, milli_value, parse_quantity, whole_value


@pytest.mark.parametrize(("text", "exact"), [
    ("8", Fraction(8)), ("0", Fraction(0)), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)), (".5", Fraction(1, 2)),
    ("1.", Fraction(1)), ("+2", Fraction(2)), ("-3", Fraction(-3)),
    ("1Ki", Fraction(1024)), ("1Mi", Fraction(1 << 20)), ("1.5Gi", Fraction(3 << 29)), ("2Ti", Fraction(2 << 40)),
    ("1Pi", Fraction(1 << 50)), ("1Ei", Fraction(1 << 60)),
    ("5n", Fraction(5, 10**9)), ("3u", Fraction(3, 10**6)), ("250m", Fraction(1, 4)), ("2k", Fraction(2000)),
    ("3M", Fraction(3 * 10**6)), ("4G", Fraction(4 * 10**9)), ("1T", Fraction(10**12)), ("1P", Fraction(10**15)),
    ("1E", Fraction(10**18)),
    ("1e3", Fraction(1000)), ("1E3", Fraction(1000)), ("12e-1", Fraction(6, 5)), ("5e+2", Fraction(500)),
    ("2.5e-3", Fraction(1, 400)),
])
def test_parse_exact(text: str, exact: Fraction) -> None:
    assert parse_quantity(text) == exact


def test_json_numbers_read_as_kubernetes_does() -> None:
    assert parse_quantity(4) == 4
    assert parse_quantity(0.25) == Fraction(1, 4)


@pytest.mark.parametrize(("text", "milli", "whole"), [
    ("100m", 100, 1), ("0.1", 100, 1), ("1", 1000, 1), ("1001m", 1001, 2), ("0.0001", 1, 1), ("5n", 1, 1),
    ("1Gi", 1073741824000, 1073741824), ("1.5", 1500, 2),
])
def test_rounding_is_up_as_milli_value_and_value(text: str, milli: int, whole: int) -> None:
    q = parse_quantity(text)
    assert (milli_value(q), whole_value(q)) == (milli, whole)


def test_sums_are_exact_where_floats_are_not() -> None:
    assert 0.1 + 0.2 != 0.3
    assert parse_quantity("0.1") + parse_quantity("0.2") == parse_quantity("300m")


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", " 1", "1 ", "1KiB", "1e", "1ki", ".", "Mi", "1 Gi", "0x10",
                                 "1_000", "١", "e3", "--1", "1e101", "1" * 200, "inf", "nan"])
def test_malformed_text_is_refused(bad: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


@pytest.mark.parametrize("bad", [None, True, [], {}, float("inf"), float("nan"), b"1"])
def test_non_quantity_values_are_refused(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)
