"""glmcot.data"""
