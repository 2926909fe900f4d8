-- The cover picture an uploaded audio file carries (ID3 APIC, a FLAC or Ogg picture block, an M4A covr atom), copied
-- out at upload as a file beside the service's media and named by its content (`{hash}.png|jpg`): files of one album
-- share it. A file without one, or with one that is not a PNG or JPEG within the artwork limits, has none.
ALTER TABLE service_files ADD COLUMN artwork_name text, ADD COLUMN artwork_type text;
-- The picture of the track as it was when it began to play (AutoDJ's; live sources send titles only).
ALTER TABLE now_playing ADD COLUMN artwork_name text;
