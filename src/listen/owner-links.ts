/**
 * What the owner of a listen page reaches from its profile: the listeners' figures (also as a spreadsheet), the
 * recorded shows and their feed, and the usage. All owner routes but the feed, which is public unless made private.
 */
export function ownerLinks(apiBaseUrl: string, serviceId: string) {
  const service = `${apiBaseUrl}/services/${serviceId}`;
  return {
    stats: `${service}/stats`,
    stats_csv: `${service}/stats.csv`,
    recordings: `${service}/recordings`,
    podcast_feed: `${service}/podcast.xml`,
    usage: `${service}/usage`,
  };
}
