package functions

import (
	"context"
	"time"
)

// Check reports whether team's function name exists (ENotFound if not).
func (s *Service) Check(ctx context.Context, teamID, name string) error {
	_, err := s.cfg.Store.GetFunction(ctx, teamID, name)
	return err
}

// InvokeScheduled runs team's function name for a cron occurrence (the
// handler's context carries executionID and fireAt) and returns how it
// ended; it makes the functions Service a cron.Invoker.
func (s *Service) InvokeScheduled(ctx context.Context, teamID, name string, data []byte, executionID string, fireAt time.Time) (string, string, string, error) {
	inv, err := s.Invoke(ctx, teamID, name, data, InvokeOptions{Trigger: "cron", ExecutionID: executionID, ScheduledTime: fireAt})
	if err != nil {
		return "", "", "", err
	}
	msg := ""
	if inv.Error != nil {
		msg = inv.Error.Type + ": " + inv.Error.Message
	}
	status := inv.Status
	if status == StatusError {
		status = StatusFailed
	}
	return inv.ID, status, msg, nil
}
