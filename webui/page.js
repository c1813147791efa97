// SeedLab's page script, run once when the page loads (app.py hands it to Gradio; webui/wiring.py: page_js fills
// in SPELLINGS). It installs the keyboard shortcuts and `window.seedlab`, the helpers the events' own scripts call
// (webui/wiring.py: SHOW_CELL, SHOWING, ...).
() => {
    // Ctrl+Enter (Cmd+Enter) in the prompt presses Generate, unless it is busy; plain Enter still adds a line.
    // Enter in the seeds box while a grid runs would be dropped without a word (Gradio ignores a trigger whose event
    // is still pending): it is stopped here and the page says why until Generate is ready.
    document.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" || !(event.target instanceof Element)) return;
        const button = document.querySelector("#generate");
        const busy = button !== null && button.disabled;
        if (event.target.closest("#seeds") && !event.shiftKey && busy) {
            event.preventDefault();
            event.stopImmediatePropagation();
            const note = document.querySelector("#busy-note");
            if (!note) return;
            note.textContent = "Still generating: press Enter again when it is done, or Stop to end it.";
            const clear = setInterval(() => {
                if (!button.disabled) { note.textContent = ""; clearInterval(clear); }
            }, 250);
            return;
        }
        if (!(event.ctrlKey || event.metaKey) || !event.target.closest("#prompt")) return;
        event.preventDefault();
        if (button && !busy) button.click();
    }, true);
    // A sampler typed as a tool writes it ("euler", "Euler", "DDIM") and Enter: that exact sampler, not the first
    // menu entry containing the text (typing euler would pick "Euler a (A1111)", another sampler).
    const spellings = SPELLINGS;
    document.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" || !(event.target instanceof Element)) return;
        const input = event.target.closest("#scheduler input, #hires-sampler input");
        const label = input ? spellings[input.value.trim()] : undefined;
        if (label === undefined) return;
        event.preventDefault();
        event.stopImmediatePropagation();
        input.value = label;  // the menu takes a typed label that is one of its own when it loses the focus
        input.dispatchEvent(new Event("input", {bubbles: true}));
        input.blur();
    }, true);

    // After a click on a grid or variation cell: the Selected image panel docked under the grid and scrolled into
    // view, its top first where it does not fit, so a panel taller than the window shows its title, not its bottom.
    // Where its image is already on the screen (a laptop: under the grid, beside the variations box) the page stays,
    // so the grid, the picked image and the variations stay in view together.
    const showCell = () => {
        const panel = document.querySelector("#cell-panel");
        if (!panel) return;
        panel.classList.remove("floating");
        document.body.classList.remove("cell-floating");
        const box = panel.getBoundingClientRect();
        const image = document.querySelector("#cell-image")?.getBoundingClientRect();
        const seen = box.top >= 0 && image && image.height > 0 && image.bottom <= innerHeight;
        if (!seen && (box.top < 0 || box.bottom > innerHeight)) {
            panel.scrollIntoView({block: box.top < 0 || box.height > innerHeight ? "start" : "nearest"});
        }
    };
    // A click on a cell far down the page (a plot, the matrix, travel, nudges, history) on a wide screen: the panel
    // floats at the side instead, so the page stays where the cells are compared; on a phone it is scrolled to.
    const showCellHere = () => {
        const panel = document.querySelector("#cell-panel");
        if (!panel) return;
        if (innerWidth < 1024) return showCell();
        if (panel.classList.contains("floating")) return;
        // the page makes room beside it: what is at the middle of the screen stays where it is
        const middle = document.elementFromPoint(innerWidth / 2, innerHeight / 2);
        const before = middle ? middle.getBoundingClientRect().top : 0;
        panel.classList.add("floating");
        document.body.classList.add("cell-floating");
        if (middle) scrollBy(0, middle.getBoundingClientRect().top - before);
    };
    // After "Make anchor": the anchor in view (the panel docked again), where the next step, the variations, starts.
    const showAnchor = () => {
        document.querySelector("#cell-panel")?.classList.remove("floating");
        document.body.classList.remove("cell-floating");
        document.querySelector("#anchor")?.scrollIntoView({block: "center"});
    };
    const showSeeds = () => { document.querySelector("#seeds")?.scrollIntoView({block: "nearest"}); };
    // Where a run's cells will be, brought into view when it is below the screen (a phone: the grid is ~1,900 px
    // under Generate).
    const showPlace = (id) => {
        const place = document.getElementById(id);
        if (place && place.getBoundingClientRect().top > innerHeight) place.scrollIntoView({block: "start"});
    };
    // A verdict (a link opened, an image dropped or regenerated) in view where it is below the screen: on a phone
    // the panel's first column, the link box and the drop area, comes first. It may be laid out a few frames after
    // its text arrives, so this looks for up to 2 s.
    const showVerdict = (text) => {
        if (!text) return;
        const started = performance.now();
        const look = () => {
            const verdict = document.getElementById("verdict");
            const box = verdict ? verdict.getBoundingClientRect() : null;
            if (box && box.height > 0) {
                if (box.top > innerHeight) verdict.scrollIntoView({block: "start"});
            } else if (performance.now() - started < 2000) requestAnimationFrame(look);
        };
        look();
    };
    // A cell is named by what it shows: a screen reader said "Thumbnail 3 of 4" for every gallery, the same for a
    // grid cell and a variation; its caption ("seed 3", a variation's prompt) names it instead, with its place.
    const nameCells = () => {
        for (const item of document.querySelectorAll(".cells .thumbnail-item")) {
            const caption = item.querySelector(".caption-label")?.textContent?.trim();
            const gallery = item.closest(".cells")?.querySelector("label, .label-wrap, [data-testid=block-label]");
            const where = gallery?.textContent?.trim();
            const name = caption ? `${caption}${where ? ` (${where})` : ""}` : null;
            if (name && item.getAttribute("aria-label") !== name) item.setAttribute("aria-label", name);
        }
    };
    let naming = null;
    new MutationObserver(() => {
        if (naming === null) naming = requestAnimationFrame(() => { naming = null; nameCells(); });
    }).observe(document.body, {childList: true, subtree: true, characterData: true});
    window.seedlab = {showCell, showCellHere, showAnchor, showSeeds, showPlace, showVerdict};
    document.body.dataset.seedlab = "ready";  // the shortcuts work from here on (tests wait for it)
}
