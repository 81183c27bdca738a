"""Figures and the HTML report, built from saved results only."""
