"""A page that has settled: no request to the app in flight, its queue streams closed, and quiet for a while.

Browser tests that look at the page in the middle of an event chain pass while a later step of the chain
undoes what they saw. `open_settled` counts the page's requests to the app (fetch and EventSource, the
queue's streams until they end; not the heartbeat, open as long as the page) from before the page's first script
runs; `settle` waits until none has been in flight for QUIET_MS, long enough for every chained event (`.then`,
`.success`, `.failure`) to have been sent had there been one.
"""

QUIET_MS = 500
TIMEOUT_MS = 60_000

TRACKER = """
(() => {
    let inflight = 0;
    const open = new Map();  // what is in flight, by a running number: its address (for a test's message)
    let serial = 0;
    window.__seedlabOpen = () => [...open.values()];
    const touch = () => { window.__seedlabLast = performance.now(); };
    // Requests to the app, except the heartbeat: a stream that stays open as long as the page does.
    const app = (url) => String(url).includes("/gradio_api/") && !String(url).includes("/heartbeat");
    window.__seedlabInflight = () => inflight;
    touch();
    const fetch = window.fetch;
    window.fetch = async function (resource, options) {
        const url = resource && resource.url ? resource.url : resource;
        if (!app(url)) return fetch.call(this, resource, options);
        inflight += 1; touch();
        const number = ++serial;
        open.set(number, String(url));
        let finished = false;
        const finish = () => { if (!finished) { finished = true; inflight -= 1; open.delete(number); touch(); } };
        let response;
        try {
            response = await fetch.call(this, resource, options);
        } catch (error) { finish(); throw error; }
        // A stream (the queue's events) is in flight until it ends; any other answer once it arrives (its
        // body may never be read: the page ignores what /cancel and /reset answer).
        const type = response.headers.get("content-type") || "";
        if (!response.body || !type.includes("event-stream")) { finish(); return response; }
        const reader = response.body.getReader();
        const body = new ReadableStream({
            async pull(controller) {
                try {
                    const { done, value } = await reader.read();
                    touch();
                    if (done) { controller.close(); finish(); } else { controller.enqueue(value); }
                } catch (error) { finish(); controller.error(error); }
            },
            cancel(reason) { finish(); return reader.cancel(reason); },
        });
        return new Response(body, { status: response.status, statusText: response.statusText,
                                    headers: response.headers });
    };
    const Source = window.EventSource;
    if (Source) {
        window.EventSource = function (url, options) {
            const source = new Source(url, options);
            if (!app(url)) return source;
            inflight += 1; touch();
            let open = true;
            const close = source.close.bind(source);
            source.close = () => { if (open) { open = false; inflight -= 1; touch(); } close(); };
            source.addEventListener("message", touch);
            source.addEventListener("error", () => { if (source.readyState === 2 && open) { open = false; inflight -= 1; touch(); } });
            return source;
        };
        window.EventSource.prototype = Source.prototype;
    }
})();
"""  # noqa: E501 - the script's text as the browser runs it (one long line; reflowing would change the text)


def open_settled(browser, url: str, width: int = 1400, height: int = 900, locale: str | None = None):
    """A fresh browser context on `url`, its requests counted from the start; returns the page, settled.
    `locale`: the browser's language (navigator.language and the Accept-Language header follow it)."""
    context = browser.new_context(viewport={"width": width, "height": height},
                                  **({"locale": locale} if locale else {}))
    context.add_init_script(TRACKER)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.wait_for_function("document.body.dataset.seedlab === 'ready'")
    settle(page)
    return page


def settle(page, timeout_ms: int = TIMEOUT_MS) -> None:
    """Wait until no request to the app has been in flight for QUIET_MS (every chained event done)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            "quiet => window.__seedlabInflight() === 0 && performance.now() - window.__seedlabLast > quiet",
            arg=QUIET_MS, timeout=timeout_ms, polling=100)
    except PlaywrightTimeout:
        raise AssertionError(f"the page did not settle: still in flight {page.evaluate('window.__seedlabOpen()')}") \
            from None


def value(page, elem_id: str) -> str:
    """The text of the plain-text box `elem_id` now."""
    return page.evaluate("id => { const box = document.querySelector(`#${id} textarea, #${id} input`);"
                         " return box === null ? null : box.value; }", elem_id)


def ready(page) -> bool:
    """Generate says it generates and takes clicks; Stop has nothing to stop."""
    return page.evaluate("""() => {
        const generate = document.querySelector('#generate'), stop = document.querySelector('#stop');
        return !generate.disabled && generate.innerText.trim() === 'Generate grid' && stop.disabled;
    }""")
