"""The chat page at GET /, driven in headless Chromium (Debian's chromium + chromium-driver, the
selenium package): a real streamed round trip on SmolLM2, and model output with HTML / script in
it shown as text. Skips, saying why, when the browser or its driver is missing."""

import shutil

import pytest

from conftest import API_KEY

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium missing (scripts/setup.sh)")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

QUESTION = "What is the capital of France? Answer in one sentence."


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip("chromium / chromedriver missing (scripts/setup.sh installs chromium and "
                    "chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=390,844"):  # a phone-sized window
        options.add_argument(arg)
    # The driver from the distribution, never one fetched at run time.
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    yield driver
    driver.quit()


def open_page(browser, server):
    browser.get(server.base + "/")
    assert browser.title == "tachyon chat"
    browser.find_element(By.ID, "settings-panel").click()
    for field, value in (("api_key", API_KEY), ("temperature", "0"), ("max_tokens", "32")):
        box = browser.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)


def wait_for_reply(browser, timeout=120):
    WebDriverWait(browser, timeout).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done='true']"))
    return browser.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]


def test_streamed_answer_appears(browser, smollm2_server, smollm2_client):
    open_page(browser, smollm2_server)
    # Record every text the reply shows while it streams.
    browser.execute_script("""
        window.seen = [];
        new MutationObserver(() => {
          const m = document.querySelectorAll('.msg.assistant');
          if (m.length) window.seen.push(m[m.length - 1].textContent);
        }).observe(document.getElementById('messages'),
                   {subtree: true, childList: true, characterData: true});""")
    box = browser.find_element(By.ID, "input")
    box.send_keys(QUESTION)
    browser.find_element(By.ID, "send").click()
    reply = wait_for_reply(browser)
    text = reply.find_element(By.TAG_NAME, "p").text
    assert "Paris" in text, reply.text
    # The page's answer is the API's greedy answer, and it arrived in pieces.
    chat = smollm2_client.chat.completions.create(
        model="smollm2", max_tokens=32, temperature=0,
        messages=[{"role": "user", "content": QUESTION}])
    assert text == chat.choices[0].message.content.strip()
    seen = [s for s in browser.execute_script("return window.seen") if s]
    assert len(set(seen)) > 2, seen
    assert "tokens" in reply.find_element(By.CLASS_NAME, "meta").text
    assert browser.find_element(By.ID, "stop").get_attribute("disabled") is not None
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "idle"


def test_html_in_model_output_is_text(browser, smollm2_server):
    """The reply is a fake stream (fetch replaced in the page) full of markup: none of it may
    become elements or run; the Markdown around it still renders."""
    open_page(browser, smollm2_server)
    evil = ("<script>window.pwned = 1</script> <img src=x onerror=\"window.pwned = 2\">\n\n"
            "**bold** and `<b>code</b>`\n\n```html\n<iframe src=\"javascript:alert(1)\"></iframe>\n```")
    browser.execute_script("""
        const evil = arguments[0];
        window.fetch = async () => {
          const enc = new TextEncoder();
          const chunks = [evil.slice(0, 30), evil.slice(30)].map((t) =>
            'data: ' + JSON.stringify({choices: [{index: 0, delta: {content: t}}]}) + '\\n\\n');
          chunks.push('data: [DONE]\\n\\n');
          return new Response(new ReadableStream({start(c) {
            for (const s of chunks) c.enqueue(enc.encode(s));
            c.close();
          }}), {status: 200, headers: {'Content-Type': 'text/event-stream'}});
        };""", evil)
    browser.find_element(By.ID, "input").send_keys("say something")
    browser.find_element(By.ID, "send").click()
    reply = wait_for_reply(browser, timeout=30)
    assert browser.execute_script("return window.pwned") is None
    for tag in ("script", "img", "iframe", "b"):
        assert reply.find_elements(By.TAG_NAME, tag) == [], tag
    assert "<script>window.pwned = 1</script>" in reply.text
    assert reply.find_element(By.TAG_NAME, "strong").text == "bold"
    assert reply.find_element(By.CSS_SELECTOR, "p code").text == "<b>code</b>"
    assert reply.find_element(By.CSS_SELECTOR, "pre code").text.startswith("<iframe")


def test_no_page_without_a_chat_template(tmp_path):
    from conftest import Server
    s = Server(tmp_path, chat_template=None, api_key=None)  # stories260K has no template
    try:
        status, headers, body = s.request("GET", "/")
        assert status == 404, body
    finally:
        assert s.stop() == 0


def test_page_is_self_contained(smollm2_server):
    status, headers, html = smollm2_server.request("GET", "/", headers={"Authorization": ""})
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert 'name="viewport"' in html
    for external in ("http://", "https://", "src=\"//", "innerHTML", "outerHTML",
                     "insertAdjacentHTML", "document.write"):
        assert external not in html, external
