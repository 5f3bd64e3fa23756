package appliance

// The service's view of the runner's slots: the GPU types it offers to
// submissions, and the board an admin reads and drains (GET /api/gpus).

import (
	"sort"
	"strings"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
)

// slotBoard is what the service asks of the runner's slots.
type slotBoard interface {
	Status() api.GPUsStatus
	Drain(id, why string) error
	Undrain(id string) error
}

// attach hands the service the running runner's slots.
func (s *Service) attach(b slotBoard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.board = b
}

// slotsNow is the runner's slots, or an error while it has not started.
func (s *Service) slotsNow() (slotBoard, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.board == nil {
		return nil, api.Errorf(api.CodeUnavailable, "the runner has not started")
	}
	return s.board, nil
}

// GPUs is the inventory and what each slot is doing.
func (s *Service) GPUs() (api.GPUsStatus, error) {
	b, err := s.slotsNow()
	if err != nil {
		return api.GPUsStatus{}, err
	}
	return b.Status(), nil
}

// Drain stops a slot from taking jobs, saying why; it answers the slots.
func (s *Service) Drain(id, why string) (api.GPUsStatus, error) {
	b, err := s.slotsNow()
	if err != nil {
		return api.GPUsStatus{}, err
	}
	if strings.HasPrefix(why, pausedWhy) {
		return api.GPUsStatus{}, api.Errorf(api.CodeInvalid, "a drain's reason may not begin %q, which marks a pause (kernelbox admin queue pause)", pausedWhy)
	}
	if err := b.Drain(id, why); err != nil {
		return api.GPUsStatus{}, err
	}
	return b.Status(), nil
}

// Undrain lets a drained slot take jobs again; it answers the slots.
func (s *Service) Undrain(id string) (api.GPUsStatus, error) {
	b, err := s.slotsNow()
	if err != nil {
		return api.GPUsStatus{}, err
	}
	if err := b.Undrain(id); err != nil {
		return api.GPUsStatus{}, err
	}
	return b.Status(), nil
}

// pausedWhy opens the drain reason of a slot that a pause took out of
// service, so that a resume brings back those and not a slot a failed
// health check or an operator drained for a reason of its own.
const pausedWhy = "queue paused: "

// Pause drains every slot in service: running jobs finish, queued ones
// wait, submissions are still taken. Like a drain it holds across
// restarts, until Resume.
func (s *Service) Pause(why string) (api.GPUsStatus, error) {
	b, err := s.slotsNow()
	if err != nil {
		return api.GPUsStatus{}, err
	}
	if why == "" {
		why = "the queue is paused by an organiser"
	}
	for _, sl := range b.Status().Slots {
		if sl.Drained != "" {
			continue
		}
		if err := b.Drain(sl.ID, pausedWhy+why); err != nil {
			return api.GPUsStatus{}, err
		}
	}
	return b.Status(), nil
}

// Resume undrains the slots Pause drained.
func (s *Service) Resume() (api.GPUsStatus, error) {
	b, err := s.slotsNow()
	if err != nil {
		return api.GPUsStatus{}, err
	}
	for _, sl := range b.Status().Slots {
		if strings.HasPrefix(sl.Drained, pausedWhy) {
			if err := b.Undrain(sl.ID); err != nil {
				return api.GPUsStatus{}, err
			}
		}
	}
	return b.Status(), nil
}

// offer records the slots the box serves, by GPU type: what submissions
// may ask for, and how many GPUs a gang may have.
func (s *Service) offer(slots []runner.Slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range slots {
		s.slots[sl.GPUType]++
	}
}

// gpuTypes lists the GPU types the runner serves.
func (s *Service) gpuTypes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for g, n := range s.slots {
		if n > 0 {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}

func (s *Service) slotCount(gpuType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slots[gpuType]
}
