package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Code classifies an error for API clients; the CLI turns it into an exit
// status (ExitStatus) and the HTTP layer into a status code (HTTPStatus),
// each in one function.
type Code string

// The error codes of the API.
const (
	CodeInvalid      Code = "invalid"            // the request is malformed or names something impossible
	CodeUnauthorized Code = "unauthorized"       // no token, or a bad one
	CodeForbidden    Code = "forbidden"          // authenticated, but not allowed (role, ban, deadline, closed leaderboard)
	CodeNotFound     Code = "not_found"          // no such user, leaderboard, submission
	CodeConflict     Code = "conflict"           // already exists, or the state does not allow it
	CodeTooLarge     Code = "too_large"          // a body over the size limit
	CodeExhausted    Code = "resource_exhausted" // a rate limit or queue cap
	CodeUnavailable  Code = "unavailable"        // the box cannot take work now (no runner for that GPU, shutting down)
	CodeStorageFull  Code = "storage_full"       // the box's disk is full: nothing can be stored until an operator frees space
	CodeInternal     Code = "internal"           // anything else; the details stay in the server's log
)

// Error is an error with a code and a message meant for the user.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// ErrorBody is the document of every error answer: {"error": {...}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Errorf returns an *Error with the formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, internal for errors without one.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// HTTPStatus is the one mapping from error code to HTTP status.
func HTTPStatus(c Code) int {
	switch c {
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeExhausted:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeStorageFull:
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// Exit statuses of the kernelbox command. They belong to the contract:
// scripts around the CLI read them.
const (
	ExitOK           = 0 // done; for eval and submit, the submission passed
	ExitFailed       = 1 // the submission failed (or a fixture check went wrong)
	ExitUsage        = 2 // bad usage, a bad problem, or the evaluation could not run
	ExitUnauthorized = 3 // the server refused the token
	ExitRefused      = 4 // refused by policy: deadline, closed leaderboard, rate limit, size
	ExitServer       = 5 // the server could not be reached or failed
)

// ExitStatus is the one mapping from error code to exit status.
func ExitStatus(c Code) int {
	switch c {
	case CodeInvalid, CodeNotFound:
		return ExitUsage
	case CodeUnauthorized:
		return ExitUnauthorized
	case CodeForbidden, CodeConflict, CodeTooLarge, CodeExhausted:
		return ExitRefused
	}
	return ExitServer
}
