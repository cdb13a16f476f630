"""Markdown tables, for the reports the library renders (``Estimate.markdown``) and the CLI's."""


def table(headers, rows):
    """A Markdown table; cells are escaped for the pipe."""

    def cell(value):
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
