import type { Recording } from './recording-store.js';

/** What the feed says about the station (its listen page's profile). */
export interface FeedChannel {
  title: string;
  description: string | null;
  link: string;
  imageUrl: string;
  feedUrl: string;
}

/** An item's public addresses. */
export type EnclosureUrl = (recording: Recording) => string;

const escapeXml = (text: string) =>
  text.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);
// XML 1.0 has no place for most control characters; titles come from sources.
const clean = (text: string) => escapeXml(text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, ' '));

/** Seconds as itunes:duration's HH:MM:SS. */
export function itunesDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(Math.floor(s / 3600))}:${two(Math.floor((s % 3600) / 60))}:${two(s % 60)}`;
}

function itemXml(recording: Recording, channel: FeedChannel, url: EnclosureUrl): string {
  const started = recording.started_at;
  const title = `${channel.title}, ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  const played = recording.titles.map((t) => [t.artist, t.title].filter(Boolean).join(' – '));
  const description = played.length
    ? `Played: ${played.join('; ')}`
    : `Live show recorded on ${started.toUTCString()}.`;
  return `    <item>
      <title>${clean(title)}</title>
      <description>${clean(description)}</description>
      <guid isPermaLink="false">${recording.id}</guid>
      <pubDate>${started.toUTCString()}</pubDate>
      <enclosure url="${escapeXml(url(recording))}" length="${recording.size_bytes}" type="${recording.content_type}"/>
      <itunes:duration>${itunesDuration(recording.duration_seconds ?? 0)}</itunes:duration>
      <itunes:episodeType>full</itunes:episodeType>
      <itunes:explicit>false</itunes:explicit>
    </item>`;
}

/**
 * A podcast feed of a station's recorded shows: RSS 2.0 with the iTunes namespace, as podcast directories read it
 * (Apple's required channel and item elements), newest show first.
 */
export function podcastFeedXml(channel: FeedChannel, recordings: Recording[], url: EnclosureUrl): string {
  const description = channel.description || `Live shows of ${channel.title}, recorded as they were broadcast.`;
  const built = recordings[0]?.ended_at ?? new Date();
  return `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd" xmlns:atom="http://www.w3.org/2005/Atom">
  <channel>
    <title>${clean(channel.title)}</title>
    <link>${escapeXml(channel.link)}</link>
    <description>${clean(description)}</description>
    <language>en</language>
    <lastBuildDate>${built.toUTCString()}</lastBuildDate>
    <atom:link href="${escapeXml(channel.feedUrl)}" rel="self" type="application/rss+xml"/>
    <image><url>${escapeXml(channel.imageUrl)}</url><title>${clean(channel.title)}</title><link>${escapeXml(channel.link)}</link></image>
    <itunes:image href="${escapeXml(channel.imageUrl)}"/>
    <itunes:author>${clean(channel.title)}</itunes:author>
    <itunes:summary>${clean(description)}</itunes:summary>
    <itunes:category text="Music"/>
    <itunes:explicit>false</itunes:explicit>
    <itunes:type>episodic</itunes:type>
${recordings.map((r) => itemXml(r, channel, url)).join('\n')}
  </channel>
</rss>
`;
}
