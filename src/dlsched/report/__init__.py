"""HTML reports of simulator output: ``build_report(run_dir)`` turns a run, comparison or energy
replay directory into one self-contained ``report.html`` with embedded plots and tables."""

from dlsched.report.build import build_report
from dlsched.report.errors import ReportError
from dlsched.report.layout import Layout, detect_layout

__all__ = ["Layout", "ReportError", "build_report", "detect_layout"]
