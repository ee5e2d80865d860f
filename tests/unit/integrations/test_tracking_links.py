"""Which links of an email are rewritten through the click redirect, and where the open pixel goes."""

from integrations.domain.tracking import track_email, with_pixel


def rewrite(url: str) -> str | None:
    if url.startswith("https://relay.example/"):
        return None  # Relay's own pages stay as written
    return f"https://relay.example/t/c/{len(url)}/"


def test_html_links_are_rewritten_and_entities_read_as_the_browser_would():
    html = (
        '<p><a class="b" href="https://shop.example/sale?a=1&amp;b=2">Sale</a> '
        "<a href='http://blog.example/post'>Blog</a></p>"
    )
    body = track_email("", html, rewrite, None)
    assert body.links == 2
    assert 'href="https://relay.example/t/c/33/"' in body.html  # the unescaped URL is 33 characters
    assert 'href="https://relay.example/t/c/24/"' in body.html
    assert "shop.example" not in body.html


def test_other_links_stay_as_written():
    html = (
        '<a href="mailto:ada@example.com">Mail</a><a href="tel:+15551234567">Call</a><a href="#top">Top</a>'
        '<a href="https://relay.example/unsubscribe/abc/">Unsubscribe</a><a name="x">anchor</a>'
    )
    body = track_email("", html, rewrite, None)
    assert body.links == 0
    assert body.html == html


def test_text_links_are_rewritten_without_their_trailing_punctuation():
    text = "See https://shop.example/sale. Or (https://blog.example/post), or https://relay.example/unsubscribe/x/"
    body = track_email(text, None, rewrite, None)
    assert body.links == 2
    assert body.text == (
        "See https://relay.example/t/c/25/. Or (https://relay.example/t/c/25/), or https://relay.example/unsubscribe/x/"
    )
    assert body.html is None


def test_the_pixel_goes_before_the_end_of_the_body_or_at_the_end():
    url = "https://relay.example/t/o/tok&en/"
    assert with_pixel("<html><body><p>Hi</p></BODY></html>", url).endswith(
        '<img src="https://relay.example/t/o/tok&amp;en/" width="1" height="1" alt="" '
        'style="display:block;width:1px;height:1px;border:0" /></BODY></html>'
    )
    assert with_pixel("<p>Hi</p>", url).startswith("<p>Hi</p><img ")
    assert track_email("text only", None, rewrite, url).html is None  # no HTML part, no pixel
