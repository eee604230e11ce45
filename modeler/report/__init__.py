"""`modeler report`: one self-contained HTML page (or markdown) of what the runs and models say.

`runs` groups rank files into runs, `assemble.build_report` turns runs and fitted models into a
`findings.Report` (with inline SVG charts from `svg`), `render` writes it with the jinja2
templates in `templates/`, and `command` is the command line.
"""
