#!/usr/bin/env python
