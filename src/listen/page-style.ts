/**
 * The pages' style: the system's light or dark scheme, 44 px touch targets, visible focus, text contrast of 4.5:1 or
 * more in both schemes. The embed is one bar of a fixed height (EMBED_SIZE): long names are cut with an ellipsis
 * rather than wrapped, so it never outgrows the iframe oEmbed declares.
 */
export const PAGE_STYLE = `
  :root { color-scheme: light dark; --bg: #111827; --fg: #f3f4f6; --muted: #b6bcc6; --card: #1f2937;
    --accent: #2563eb; --on-accent: #fff; --focus: #93c5fd; }
  @media (prefers-color-scheme: light) {
    :root { --bg: #fff; --fg: #111827; --muted: #4b5563; --card: #f3f4f6; --focus: #1d4ed8; }
  }
  * { box-sizing: border-box; }
  body { font-family: system-ui, sans-serif; margin: 0; padding: 1.5rem 1rem; background: var(--bg); color: var(--fg);
    line-height: 1.4; }
  main { max-width: 40rem; margin: 0 auto; }
  .station { display: flex; gap: 1rem; align-items: center; }
  .art { width: 8rem; height: 8rem; border-radius: .5rem; object-fit: cover; flex: none; background: var(--card); }
  h1 { font-size: 1.6rem; margin: 0; overflow-wrap: anywhere; }
  #description { margin: .4rem 0 0; color: var(--muted); white-space: pre-line; }
  .player { margin: 1.25rem 0; padding: 1rem; border-radius: .5rem; background: var(--card); }
  .now { font-size: 1.15rem; margin: 0 0 .75rem; }
  .now .label, #artist, .facts { color: var(--muted); }
  .controls { display: flex; gap: .75rem; align-items: center; flex-wrap: wrap; }
  button { font: inherit; font-size: 1.05rem; min-height: 44px; min-width: 6.5rem; padding: .5rem 1.5rem;
    border-radius: 999px; border: 0; background: var(--accent); color: var(--on-accent); cursor: pointer; }
  button:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
  button:disabled { opacity: .6; cursor: default; }
  audio { width: 100%; min-height: 44px; }
  .facts { margin: 0; }
  .facts span + span::before { content: " · "; }
  h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
  ol { color: var(--muted); padding-left: 1.5rem; margin: 0; }
  [hidden] { display: none !important; }
  @media (max-width: 30rem) { .art { width: 5.5rem; height: 5.5rem; } h1 { font-size: 1.3rem; } }
  body.embed { padding: 8px; }
  body.embed main { display: flex; gap: 10px; align-items: center; max-width: none; }
  body.embed .art { width: 72px; height: 72px; }
  body.embed .info { min-width: 0; flex: 1; }
  body.embed h1, body.embed .now { font-size: 1rem; line-height: 20px; margin: 0; white-space: nowrap;
    overflow: hidden; text-overflow: ellipsis; }
  body.embed .now { font-size: .9rem; }
  body.embed .controls { margin-top: 4px; flex-wrap: nowrap; white-space: nowrap; }
  body.embed audio { height: 44px; }
`;
