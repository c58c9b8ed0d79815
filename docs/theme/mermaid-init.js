// Draws the book's ```mermaid blocks with mermaid.min.js (vendored, see README.md beside this
// file). mdBook renders such a block as <pre><code class="language-mermaid">…</code></pre>;
// mermaid draws the text of elements of class "mermaid".
(() => {
    const darkThemes = ['coal', 'navy', 'ayu'];
    const html = document.documentElement;
    const dark = darkThemes.some((t) => html.classList.contains(t));
    for (const code of document.querySelectorAll('code.language-mermaid')) {
        const diagram = document.createElement('pre');
        diagram.className = 'mermaid';
        // Packet paths are wide: keep their natural size and scroll, rather than shrink the text.
        diagram.style.overflowX = 'auto';
        diagram.textContent = code.textContent;
        code.closest('pre').replaceWith(diagram);
    }
    mermaid.initialize({
        startOnLoad: false,
        theme: dark ? 'dark' : 'default',
        securityLevel: 'strict',
        flowchart: { useMaxWidth: false },
    });
    mermaid.run();
})();
