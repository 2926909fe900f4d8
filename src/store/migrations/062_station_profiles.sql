-- What an owner says about a station on its listen page (PUT /services/{id}/profile). A null column means "as the
-- order said": the station_name of the order, its metadata.station_description and metadata.show_time_left.
-- The artwork's bytes are a file beside the service's AutoDJ media (named artwork_file there), checked as an image
-- on upload; the row holds what the page needs without reading the file.
CREATE TABLE station_profiles (
  service_id     text PRIMARY KEY REFERENCES services (id),
  name           text,
  description    text,
  show_time_left boolean,
  artwork_file   text,
  artwork_type   text,
  artwork_bytes  integer,
  artwork_width  integer,
  artwork_height integer,
  updated_at     timestamptz NOT NULL DEFAULT now()
);
