// Package cron fires schedules kept in the store: five cron fields with
// optional seconds, descriptors (@hourly, @every 10s) and one-shot times
// (@at RFC3339), evaluated in an IANA time zone. Parsing is
// github.com/robfig/cron/v3's; what to fire, and recording it, is this
// package's: each occurrence is claimed in the store (its execution id
// fixed) in the same transaction that moves the schedule's next fire time,
// before it fires, so a server killed at any moment neither loses nor
// doubles an occurrence — a claimed occurrence that had not finished is
// delivered again after a restart with the same execution id
// (at-least-once, exactly-once claim).
package cron
