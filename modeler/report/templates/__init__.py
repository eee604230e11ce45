"""The report's jinja2 templates, stylesheet and script: package data, inlined into every page."""
