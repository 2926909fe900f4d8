import { itunesDuration, type RecordingStore } from '../recordings/index.js';
import { escapeHtml } from './html.js';

/** A past show as the listen page lists it. */
export interface ArchiveItem {
  title: string;
  duration: string;
  url: string;
}

export interface Archive {
  items: ArchiveItem[];
  feedUrl: string;
}

/** The complete recordings of a public feed, newest first (at most 20 on the page; the feed has them all). */
export async function archiveOf(store: RecordingStore, serviceId: string, apiBaseUrl: string): Promise<Archive> {
  const feedUrl = `${apiBaseUrl}/services/${serviceId}/podcast.xml`;
  const setting = await store.setting(serviceId, {});
  if (!setting.feed_public) return { items: [], feedUrl };
  const recordings = (await store.list(serviceId, true)).slice(0, 20);
  const items = recordings.map((r) => ({
    title: `${r.started_at.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    duration: itunesDuration(r.duration_seconds ?? 0),
    url: `${apiBaseUrl}/services/${serviceId}/recordings/${r.id}.${r.file_name.split('.').pop()}`,
  }));
  return { items, feedUrl };
}

/** The page's list of past shows, each playable where it is (an audio element that loads nothing until played). */
export function archiveHtml(archive: Archive | undefined): string {
  if (!archive?.items.length) return '';
  const items = archive.items.map((item, i) => {
    const label = `Show of ${item.title}, ${item.duration}`;
    return `<li><span id="show-${i}">${escapeHtml(label)}</span>
<audio controls preload="none" src="${escapeHtml(item.url)}" aria-labelledby="show-${i}"></audio>
<a href="${escapeHtml(item.url)}" download aria-label="${escapeHtml(`Download the show of ${item.title}`)}">Download</a></li>`;
  });
  return `<section id="archive" aria-labelledby="archive-heading"><h2 id="archive-heading">Past shows</h2>
<ol id="shows">${items.join('\n')}</ol>
<p><a href="${escapeHtml(archive.feedUrl)}">Podcast feed (RSS)</a></p></section>`;
}
