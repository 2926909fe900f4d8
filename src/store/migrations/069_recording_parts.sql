-- The files a show was written to by hosts before the one recording it now, each with the bytes that belong to the
-- show (the file's size when the next host took over): a host frozen meanwhile that wakes up and writes on adds
-- nothing to the show. The show's last host writes `file_name`; when the show ends they are joined into one file.
ALTER TABLE recordings ADD COLUMN parts jsonb NOT NULL DEFAULT '[]';
