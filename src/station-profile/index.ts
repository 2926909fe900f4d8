export { ARTWORK_LIMITS, ARTWORK_NAME, artworkFileOf, checkArtwork, type CheckedArtwork } from './artwork.js';
export { imageFacts, type ArtworkType, type ImageFacts } from './image-facts.js';
export {
  StationProfiles,
  type MediaPath,
  type ProfileChanges,
  type StationProfile,
  type StoredArtwork,
} from './station-profiles.js';
