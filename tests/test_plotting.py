"""lib.plotting.interactive: the MIME bundle the book and Jupyter render (issue 18)."""

import json
import re

import altair as alt
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from lib.plotting import VEGALITE_MIME, interactive  # noqa: E402


def _chart(values):
    k = alt.param(name="k", value=1, bind=alt.binding_range(min=1, max=2, step=1, name="k"))
    return (alt.Chart(alt.Data(values=values)).mark_line().encode(x="x:Q", y="y:Q")
            .add_params(k).transform_filter("datum.k == k"))


ROWS = [{"x": 0, "y": 0, "k": 1}, {"x": 1, "y": 2, "k": 2}]


def test_bundle_spec_round_trips_through_the_html():
    fig = interactive(_chart(ROWS), "y against x")
    bundle = fig._repr_mimebundle_()
    assert set(bundle) == {VEGALITE_MIME, "text/html", "text/plain"}
    spec = bundle[VEGALITE_MIME]
    assert spec["description"] == "y against x"
    assert spec["params"][0]["bind"]["input"] == "range"
    # the JSON in the <script> parses back to the very spec (an independent parse of the HTML)
    m = re.search(r'<script type="application/json"[^>]*data-target="([^"]+)">(.*?)</script>',
                  bundle["text/html"], re.S)
    assert m and m.group(1) == fig.element_id
    assert json.loads(m.group(2)) == spec
    assert f'id="{fig.element_id}"' in bundle["text/html"]


def test_script_end_tag_in_the_data_cannot_close_the_script():
    fig = interactive(_chart(ROWS + [{"x": 2, "y": 1, "k": "</script><b>"}]), "a figure")
    html = fig.html()
    body = html.split('data-target="')[1]
    assert body.count("</script>") == 1          # only the real end tag
    m = re.search(r'">(.*)</script>', body, re.S)
    assert "</script><b>" in json.dumps(json.loads(m.group(1)))   # the value survives


def test_same_spec_same_id_different_spec_different_id():
    a, b = interactive(_chart(ROWS), "d"), interactive(_chart(ROWS), "d")
    c = interactive(_chart(ROWS[:1]), "d")
    assert a.element_id == b.element_id != c.element_id


def test_description_is_escaped_in_the_aria_label():
    fig = interactive(_chart(ROWS), 'a "quoted" <b> label')
    assert 'aria-label="a &quot;quoted&quot; &lt;b&gt; label"' in fig.html()


def test_fallback_figure_adds_a_png():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    bundle = interactive(_chart(ROWS), "d", fallback_fig=fig)._repr_mimebundle_()
    plt.close(fig)
    import base64
    assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("bad, match", [
    (dict(description=""), "description"),
    (dict(description=3), "description"),
    (dict(chart=object()), "chart"),
    (dict(chart=_chart([{"x": float("nan"), "y": 0, "k": 1}])), "NaN"),
    (dict(chart=alt.Chart("data.csv").mark_point().encode(x="x:Q")), "inline"),
    (dict(chart=_chart([{"x": i, "y": i, "k": 1} for i in range(80_000)])), "bytes"),
])
def test_bad_input_raises(bad, match):
    args = dict(chart=_chart(ROWS), description="d") | bad
    with pytest.raises(ValueError, match=match):
        interactive(args["chart"], args["description"])
