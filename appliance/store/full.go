package store

import (
	"errors"

	"github.com/mattn/go-sqlite3"
)

// IsFull says whether err is SQLite finding the database or its disk full.
func IsFull(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrFull
}
