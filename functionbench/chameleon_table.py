"""chameleon (FunctionBench): compile a page template and render a big
table (rows x columns) with it."""

from chameleon import PageTemplate

from fbserve import serve

ROWS, COLS = 100, 50
TEMPLATE = """<table xmlns="http://www.w3.org/1999/xhtml"
xmlns:tal="http://xml.zope.org/namespaces/tal">
<tr tal:repeat="row rows"><td tal:repeat="c row" tal:content="c"/></tr>
</table>"""


def work():
    table = [dict(("c%d" % c, c) for c in range(COLS)) for _ in range(ROWS)]
    html = PageTemplate(TEMPLATE)(rows=[list(r.values()) for r in table])
    return f"chameleon rows={ROWS} cols={COLS} bytes={len(html)}"


serve(work)
