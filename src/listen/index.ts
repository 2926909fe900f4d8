export { ListenPages, type ListenLookup, type PublicListenView, type PublicTrack } from './listen-view.js';
export { LISTEN_ASSETS, listenAsset } from './listen-assets.js';
export { EMBED_SIZE, embedSnippet, listenPageHtml, pagePolicy, unavailablePageHtml } from './pages.js';
export { type Archive, archiveOf } from './archive.js';
export { ownerLinks } from './owner-links.js';
